"""Tests of the error taxonomy: status mapping, transient flags, messages and Retry-After parsing."""

from __future__ import annotations

import email.utils

import pytest

from agentgrad.errors import AgentgradError
from agentgrad.providers.errors import (
    AuthError,
    BadRequestError,
    NotFoundError,
    ProviderError,
    ProviderTimeout,
    RateLimitError,
    ServerError,
    error_for_status,
    excerpt,
    parse_retry_after,
)


@pytest.mark.parametrize(("status", "cls", "transient"), [
    (401, AuthError, False), (403, AuthError, False), (404, NotFoundError, False), (400, BadRequestError, False),
    (422, BadRequestError, False), (408, ProviderTimeout, True), (429, RateLimitError, True),
    (500, ServerError, True), (503, ServerError, True), (529, ServerError, True),
])
def test_each_status_maps_to_its_error_and_transience(status: int, cls: type[ProviderError], transient: bool) -> None:
    err = error_for_status(status, b"{}", provider="p", path="/v1/x")
    assert type(err) is cls
    assert err.transient is transient
    assert isinstance(err, AgentgradError)


def test_an_error_says_provider_path_status_and_body() -> None:
    body = b'{"error": {"message": "model gpt-9 does not exist", "type": "invalid_request_error"}}'
    err = error_for_status(404, body, provider="openai:gpt-9@http://h/v1", path="/v1/chat/completions")
    text = str(err)
    for part in ("openai:gpt-9@http://h/v1", "/v1/chat/completions", "404", "model gpt-9 does not exist"):
        assert part in text


def test_excerpt_collapses_whitespace_and_truncates() -> None:
    assert excerpt(b"a \n\n b") == "a b"
    long = excerpt("x" * 1000, limit=50)
    assert long == "x" * 50 + "..."


def test_retry_after_reads_seconds_and_http_dates() -> None:
    now = 1_700_000_000.0
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(" 1.5 ") == 1.5
    assert parse_retry_after(email.utils.formatdate(now + 7, usegmt=True), now=now) == pytest.approx(7.0)
    assert parse_retry_after(email.utils.formatdate(now - 60, usegmt=True), now=now) == 0.0


@pytest.mark.parametrize("value", [None, "", "soon", "nan", "inf"])
def test_unreadable_retry_after_is_none(value: str | None) -> None:
    assert parse_retry_after(value) is None


def test_negative_retry_after_seconds_clamp_to_zero() -> None:
    assert parse_retry_after("-5") == 0.0
