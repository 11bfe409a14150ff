"""Tests of `CallableProvider`: plain and async functions, text or `Completion`, errors passed through."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

import pytest

from agentgrad.errors import ConfigError
from agentgrad.providers import CallableProvider, Completion, Message, Usage
from tests.providers.helpers import USER


def run(provider: CallableProvider, **params: Any) -> Completion:
    return asyncio.run(provider.complete(USER, **params))


def test_a_plain_function_returning_text_becomes_a_completion() -> None:
    provider = CallableProvider(lambda messages, **p: messages[-1].content[::-1], model="rev")
    result = run(provider)
    assert (result.text, result.usage, result.model, result.cached) == (
        "dlrow wen evarb olleh", Usage(), "rev", False)
    assert run(provider, model="asked").model == "asked"


def test_an_async_function_is_awaited() -> None:
    async def fn(messages: Sequence[Message], **params: Any) -> str:
        await asyncio.sleep(0)
        return f"t={params['temperature']}"

    assert run(CallableProvider(fn), temperature=0.5).text == "t=0.5"


def test_a_completion_is_returned_as_is() -> None:
    done = Completion("x", Usage(3, 4, 0.1), 0.5, "m", "length")
    assert run(CallableProvider(lambda m, **p: done)) is done


def test_a_wrong_return_type_is_a_config_error_not_a_transient_fault() -> None:
    with pytest.raises(ConfigError, match="int"):
        run(CallableProvider(lambda m, **p: 42))  # type: ignore[arg-type]


def test_exceptions_pass_through_unchanged() -> None:
    def broken(messages: Sequence[Message], **params: Any) -> str:
        raise KeyError("score")

    with pytest.raises(KeyError, match="score"):
        run(CallableProvider(broken))


def test_in_thread_runs_a_blocking_function_off_the_loop_thread() -> None:
    main = threading.get_ident()
    result = run(CallableProvider(lambda m, **p: str(threading.get_ident() != main), in_thread=True))
    assert result.text == "True"
