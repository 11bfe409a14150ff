"""Tests of `wrap` and `layers`: composition order and names."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from agentgrad.providers import (
    Accounting,
    Cache,
    CallableProvider,
    CircuitBreaker,
    ConcurrencyLimit,
    Meter,
    OpenAICompatible,
    Provider,
    Retry,
    wrap,
)
from agentgrad.providers.middleware import Middleware, layers
from tests.providers.fake_server import FakeServer
from tests.providers.helpers import USER


def test_wrap_applies_layers_inside_out_and_keeps_the_name() -> None:
    base = CallableProvider(lambda m, **p: "ok", name="fake")
    stack = wrap(base, lambda p: Accounting(p, Meter()), lambda p: ConcurrencyLimit(p, 4),
                 lambda p: CircuitBreaker(p), lambda p: Retry(p))
    chain = list(layers(stack))
    assert [type(p).__name__ for p in chain] == [
        "Retry", "CircuitBreaker", "ConcurrencyLimit", "Accounting", "CallableProvider"]
    assert all(p.name == "fake" for p in chain)
    assert isinstance(stack, Provider)
    assert asyncio.run(stack.complete(USER)).text == "ok"


def test_wrap_with_no_layers_is_the_provider_itself() -> None:
    base = CallableProvider(lambda m, **p: "ok")
    assert wrap(base) is base



def test_aclose_on_a_stack_closes_the_cache_and_the_provider(tmp_path: Path, server: FakeServer) -> None:
    cache = Cache(OpenAICompatible(server.url + "/v1", model="ok"), tmp_path / "c.sqlite")
    stack = wrap(cache, lambda p: Retry(p))
    assert isinstance(stack, Middleware)

    async def use_then_close() -> None:
        await stack.complete(USER, temperature=0)
        await stack.aclose()

    asyncio.run(use_then_close())
    with pytest.raises(sqlite3.ProgrammingError):
        asyncio.run(cache.complete(USER, temperature=0))
