"""The OpenAPI schema, fuzzed with schemathesis (valid and invalid requests generated from the schema): on random
and on real ids, no request gets a 500, and every response matches the schema (status, content type, body)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis import checks as sc
from schemathesis.specs.openapi import checks as oc

from agentgrad.service.app import build_service, create_app
from agentgrad.service.auth import TokenBook
from tests.service.support import TOKENS, WRITE_TOKEN, auth
from tests.service.support import settings as service_settings

CHECKS = [sc.not_a_server_error, oc.status_code_conformance, oc.content_type_conformance,
          oc.response_schema_conformance]
FUZZ = settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True,
                database=None)


@pytest.fixture(scope="module")
def fuzzed(finished_home: tuple[Path, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FastAPI,
                                                                                                       str]]:
    home = Path(shutil.copytree(finished_home[0], tmp_path_factory.mktemp("fuzz") / "home"))
    config = service_settings(home)
    service = build_service(config, TokenBook(TOKENS, default_max_jobs=config.max_jobs))
    try:
        yield create_app(service, supervise=False), finished_home[1]
    finally:
        service.jobs.close()


def _fuzz(app: FastAPI, mode: GenerationMode, real_run: str | None) -> int:
    """Call every operation with generated cases; how many operations were fuzzed."""
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    operations = [result.ok() for result in schema.get_all_operations()]  # type: ignore[union-attr]
    for operation in operations:
        @FUZZ
        @given(case=operation.as_strategy(generation_mode=mode), use_real=st.booleans())
        def call(case: schemathesis.Case[Any], use_real: bool) -> None:
            if real_run is not None and use_real and case.path_parameters and "job_id" in case.path_parameters:
                case.path_parameters["job_id"] = real_run
            case.call_and_validate(headers=auth(WRITE_TOKEN), checks=CHECKS)

        try:
            call()
        except Exception as exc:
            raise AssertionError(f"{operation.label} ({mode.value}): {exc}") from exc
    return len(operations)


@pytest.mark.slow
def test_valid_requests_get_no_500_and_every_answer_matches_the_schema(fuzzed: tuple[FastAPI, str]) -> None:
    assert _fuzz(fuzzed[0], GenerationMode.POSITIVE, fuzzed[1]) >= 15


@pytest.mark.slow
def test_invalid_requests_are_refused_with_documented_json_errors(fuzzed: tuple[FastAPI, str]) -> None:
    assert _fuzz(fuzzed[0], GenerationMode.NEGATIVE, fuzzed[1]) >= 15
