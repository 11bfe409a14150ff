"""Tests of `OpenAICompatible` against the fake server: answers, streaming, and each failure mapped to its error."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import httpx
import pytest

from agentgrad.errors import ConfigError
from agentgrad.providers import (
    AuthError,
    BadRequestError,
    Completion,
    ConnectionLost,
    MalformedResponse,
    Message,
    NotFoundError,
    OpenAICompatible,
    ProviderError,
    ProviderTimeout,
    RateLimitError,
    Retry,
    ServerError,
)
from tests.providers.fake_server import FakeServer
from tests.providers.helpers import USER, RecordingSleep

CHAT = (Message("system", "be brief"), Message("user", "hello there"))


def call(provider: OpenAICompatible, messages: tuple[Message, ...] = USER, **params: Any) -> Completion:
    return asyncio.run(provider.complete(messages, **params))


def fails(provider: OpenAICompatible, model: str, **params: Any) -> ProviderError:
    with pytest.raises(ProviderError) as info:
        call(provider, model=model, **params)
    return info.value


@pytest.fixture
def provider(server: FakeServer) -> OpenAICompatible:
    return OpenAICompatible(server.url + "/v1", api_key="sk-test", model="ok")


def test_success_returns_text_usage_model_and_finish_reason(provider: OpenAICompatible, server: FakeServer) -> None:
    result = call(provider, CHAT)
    assert result.text == "[system: be brief] echo: hello there"
    assert (result.usage.input_tokens, result.usage.output_tokens) == (4, 6)
    assert (result.model, result.finish_reason, result.cached) == ("ok", "stop", False)
    assert result.latency > 0
    assert server.seen[-1].headers["authorization"] == "Bearer sk-test"


def test_params_go_into_the_body_and_none_params_are_left_out(provider: OpenAICompatible,
                                                              server: FakeServer) -> None:
    call(provider, temperature=0, max_tokens=5, stop=["\n"], seed=None, timeout=5)
    body = server.seen[-1].body
    assert (body["temperature"], body["max_tokens"], body["stop"]) == (0, 5, ["\n"])
    assert "seed" not in body and "timeout" not in body and "stream" not in body


def test_streaming_gives_the_same_answer_and_usage_from_the_final_chunk(provider: OpenAICompatible,
                                                                        server: FakeServer) -> None:
    plain = call(provider, CHAT)
    streamed = call(provider, CHAT, stream=True)
    assert (streamed.text, streamed.usage, streamed.finish_reason) == (plain.text, plain.usage, "stop")
    assert server.seen[-1].body["stream_options"] == {"include_usage": True}


def test_a_401_fails_at_once_with_a_single_request_even_under_retry(server: FakeServer) -> None:
    sleep = RecordingSleep()
    stack = Retry(OpenAICompatible(server.url + "/v1", model="err-401"), sleep=sleep)
    with pytest.raises(AuthError) as info:
        asyncio.run(stack.complete(USER))
    assert server.counts["err-401"] == 1
    assert sleep.waits == []
    assert info.value.status == 401 and "/v1/chat/completions" in str(info.value)


def test_an_unknown_model_is_not_found(provider: OpenAICompatible, server: FakeServer) -> None:
    err = fails(provider, "no-such-model")
    assert isinstance(err, NotFoundError) and not err.transient
    assert "no-such-model" in err.excerpt


@pytest.mark.parametrize(("model", "cls"), [("err-403", AuthError), ("err-400", BadRequestError),
                                            ("err-500", ServerError), ("rate-limit-then-ok", RateLimitError)])
@pytest.mark.parametrize("stream", [False, True])
def test_error_statuses_map_in_both_modes(provider: OpenAICompatible, model: str, cls: type[ProviderError],
                                          stream: bool) -> None:
    assert type(fails(provider, model, stream=stream)) is cls


def test_a_429_carries_the_retry_after_header(provider: OpenAICompatible) -> None:
    err = fails(provider, "rate-limit-then-ok")
    assert isinstance(err, RateLimitError) and err.retry_after == 3.0


def test_a_slow_server_times_out_at_the_client_timeout(provider: OpenAICompatible) -> None:
    start = time.perf_counter()
    err = fails(provider, "slow-2s", timeout=0.2)
    assert isinstance(err, ProviderTimeout) and err.transient
    assert time.perf_counter() - start < 1.5


def test_a_slow_server_within_the_timeout_answers(provider: OpenAICompatible) -> None:
    assert call(provider, model="slow-50ms", timeout=5).text == "echo: hello brave new world"


@pytest.mark.parametrize("stream", [False, True])
def test_a_connection_reset_mid_body_is_connection_lost(provider: OpenAICompatible, stream: bool) -> None:
    err = fails(provider, "reset-mid-body", stream=stream)
    assert isinstance(err, ConnectionLost) and err.transient


def test_a_stream_cut_before_done_is_connection_lost(provider: OpenAICompatible) -> None:
    assert isinstance(fails(provider, "stream-cut", stream=True), ConnectionLost)


@pytest.mark.parametrize("model", ["malformed", "missing-fields", "no-usage"])
@pytest.mark.parametrize("stream", [False, True])
def test_broken_or_incomplete_answers_are_malformed(provider: OpenAICompatible, model: str, stream: bool) -> None:
    err = fails(provider, model, stream=stream)
    assert isinstance(err, MalformedResponse) and err.transient


def test_a_server_without_usage_can_be_allowed_and_counts_zero(server: FakeServer) -> None:
    lenient = OpenAICompatible(server.url + "/v1", model="no-usage", require_usage=False)
    result = call(lenient)
    assert result.text == "echo: hello brave new world" and result.usage.input_tokens == 0


def test_lone_surrogates_in_an_answer_are_replaced(provider: OpenAICompatible) -> None:
    result = call(provider, model="surrogate")
    assert result.text.endswith("\ufffd")
    result.text.encode("utf-8")


def test_a_refused_connection_is_connection_lost() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    err = fails(OpenAICompatible(f"http://127.0.0.1:{port}/v1", model="ok"), "ok")
    assert isinstance(err, ConnectionLost)


def test_a_client_passed_in_is_used_and_left_open(server: FakeServer) -> None:
    async def run() -> tuple[str, bool]:
        async with httpx.AsyncClient(headers={"x-marker": "mine"}) as client:
            result = await OpenAICompatible(server.url + "/v1", model="ok", client=client).complete(USER)
            return result.text, client.is_closed

    text, closed = asyncio.run(run())
    assert text.startswith("echo:") and not closed
    assert server.seen[-1].headers["x-marker"] == "mine"


@pytest.mark.parametrize("url", ["127.0.0.1:8000/v1", "ftp://h/v1", ""])
def test_a_base_url_that_is_not_http_is_refused(url: str) -> None:
    with pytest.raises(ConfigError):
        OpenAICompatible(url, model="ok")
