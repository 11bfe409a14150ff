"""Tests of the provider values, message normalisation and the sync façade."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from agentgrad.providers import (
    CallableProvider,
    Completion,
    InvalidMessageError,
    Message,
    OpenAICompatible,
    SyncInLoopError,
    Usage,
    as_messages,
    clean_text,
    complete,
    complete_sync,
)
from tests.providers.fake_server import FakeServer


def echo(messages: Sequence[Message], **params: Any) -> str:
    return f"{messages[-1].content}|{params.get('temperature')}"


def test_dicts_and_messages_normalise_to_the_same_conversation() -> None:
    mixed = as_messages([{"role": "system", "content": "s"}, Message("user", "u")])
    assert mixed == (Message("system", "s"), Message("user", "u"))
    assert as_messages("just text") == (Message("user", "just text"),)


@pytest.mark.parametrize(("bad", "where"), [
    ([{"role": "wizard", "content": "x"}], "messages[0]"),
    ([Message("user", "ok"), {"role": "user", "content": 3}], "messages[1]"),
    ([{"content": "no role"}], "messages[0]"),
    ([], "non-empty"),
])
def test_a_malformed_message_is_refused_naming_where(bad: Any, where: str) -> None:
    with pytest.raises(InvalidMessageError, match=where.replace("[", r"\[").replace("]", r"\]")):
        as_messages(bad)


def test_usage_refuses_negative_or_non_integer_counts() -> None:
    with pytest.raises(InvalidMessageError):
        Usage(-1, 0)
    with pytest.raises(InvalidMessageError):
        Usage(1, 2, float("nan"))
    with pytest.raises(InvalidMessageError):
        Usage(True, 0)


def test_clean_text_replaces_lone_surrogates_and_keeps_real_characters() -> None:
    assert clean_text("a\ud800b") == "a\ufffdb"
    assert clean_text("smile 😀") == "smile 😀"
    clean_text("x\udfff").encode("utf-8")  # must not raise


def test_complete_sync_runs_an_async_provider_and_accepts_dicts() -> None:
    result = complete_sync(CallableProvider(echo), [{"role": "user", "content": "hi"}], temperature=0)
    assert isinstance(result, Completion)
    assert result.text == "hi|0"


def test_complete_sync_inside_a_running_loop_is_a_clear_error() -> None:
    async def inside() -> None:
        with pytest.raises(SyncInLoopError, match="running event loop"):
            complete_sync(CallableProvider(echo), "hi")

    asyncio.run(inside())


def test_async_complete_helper_normalises_messages() -> None:
    result = asyncio.run(complete(CallableProvider(echo), "plain"))
    assert result.text == "plain|None"


def test_one_http_provider_serves_many_sync_calls_each_on_its_own_loop(server: FakeServer) -> None:
    provider = OpenAICompatible(server.url + "/v1", model="ok")
    texts = [complete_sync(provider, f"call {i}").text for i in range(3)]
    assert texts == ["echo: call 0", "echo: call 1", "echo: call 2"]
    assert server.counts["ok"] == 3
