"""A service home with one finished run (built once), shared by the read-only tests."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.service.support import client, start, wait_state, world


@pytest.fixture(scope="session")
def finished_home(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    home = tmp_path_factory.mktemp("service-home")
    with client(home) as api:
        job = start(api, world(), name="finished")
        assert wait_state(api, job["id"], ["finished", "failed"])["state"] == "finished"
    return home, str(job["id"])


@pytest.fixture
def finished(finished_home: tuple[Path, str], tmp_path: Path) -> Iterator[tuple[TestClient, str, Path]]:
    """A client of a copy of the home with the finished run, the run's id and its run directory."""
    home = Path(shutil.copytree(finished_home[0], tmp_path / "home"))
    with client(home) as api:
        yield api, finished_home[1], home / "runs" / finished_home[1]
