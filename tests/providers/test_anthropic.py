"""Tests of `Anthropic` through the official SDK against the fake server speaking the Messages wire format."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentgrad.errors import ConfigError
from agentgrad.providers import (
    Anthropic,
    AuthError,
    BadRequestError,
    Completion,
    ConnectionLost,
    InvalidMessageError,
    MalformedResponse,
    Message,
    NotFoundError,
    ProviderError,
    ProviderTimeout,
    RateLimitError,
    Retry,
    ServerError,
)
from tests.providers.fake_server import FakeServer
from tests.providers.helpers import USER, RecordingSleep

pytest.importorskip("anthropic")


def call(provider: Anthropic, messages: tuple[Message, ...] = USER, **params: Any) -> Completion:
    return asyncio.run(provider.complete(messages, **params))


def fails(provider: Anthropic, model: str, **params: Any) -> ProviderError:
    with pytest.raises(ProviderError) as info:
        call(provider, model=model, **params)
    return info.value


@pytest.fixture
def claude(server: FakeServer) -> Anthropic:
    return Anthropic(api_key="test-key", model="ok", base_url=server.url, max_tokens=64)


def test_system_messages_go_top_level_and_the_answer_is_parsed(claude: Anthropic, server: FakeServer) -> None:
    chat = (Message("system", "be brief"), Message("user", "hello there"))
    result = call(claude, chat)
    assert result.text == "[system: be brief] echo: hello there"
    assert (result.usage.input_tokens, result.usage.output_tokens) == (4, 6)
    assert (result.model, result.finish_reason) == ("ok", "end_turn")
    body = server.seen[-1].body
    assert server.seen[-1].path == "/v1/messages"
    assert body["system"] == "be brief"
    assert body["messages"] == [{"role": "user", "content": "hello there"}]
    assert body["max_tokens"] == 64


def test_sampling_params_are_left_out_and_stop_becomes_stop_sequences(claude: Anthropic, server: FakeServer) -> None:
    call(claude, temperature=0, top_p=0.9, stop="END", max_tokens=7)
    body = server.seen[-1].body
    assert "temperature" not in body and "top_p" not in body
    assert body["stop_sequences"] == ["END"] and body["max_tokens"] == 7


def test_an_unknown_param_is_refused_before_any_request(claude: Anthropic, server: FakeServer) -> None:
    with pytest.raises(ConfigError, match="frequency_penalty"):
        call(claude, frequency_penalty=0.5)
    assert server.seen == []


def test_a_tool_message_is_refused(claude: Anthropic) -> None:
    with pytest.raises(InvalidMessageError, match="tool"):
        call(claude, (Message("user", "a"), Message("tool", "b")))


def test_a_bad_key_is_one_request_and_an_auth_error(server: FakeServer) -> None:
    stack = Retry(Anthropic(api_key="bad-key", model="ok", base_url=server.url), sleep=RecordingSleep())
    with pytest.raises(AuthError) as info:
        asyncio.run(stack.complete(USER))
    assert server.counts["ok"] == 1
    assert "invalid x-api-key" in str(info.value)


@pytest.mark.parametrize(("model", "cls"), [
    ("err-404", NotFoundError), ("err-400", BadRequestError), ("err-500", ServerError), ("err-529", ServerError),
    ("reset-mid-body", ConnectionLost), ("malformed", MalformedResponse), ("missing-fields", MalformedResponse),
])
def test_sdk_errors_map_to_the_taxonomy(claude: Anthropic, model: str, cls: type[ProviderError]) -> None:
    err = fails(claude, model)
    assert type(err) is cls
    assert err.provider == claude.name and err.path == "/v1/messages"


def test_a_429_carries_retry_after_and_the_sdk_does_not_retry(claude: Anthropic, server: FakeServer) -> None:
    err = fails(claude, "rate-limit-then-ok")
    assert isinstance(err, RateLimitError) and err.retry_after == 3.0
    assert server.counts["rate-limit-then-ok"] == 1


def test_a_slow_answer_times_out(claude: Anthropic) -> None:
    assert isinstance(fails(claude, "slow-2s", timeout=0.2), ProviderTimeout)
