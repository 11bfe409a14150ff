"""Tests of `ConcurrencyLimit` (measured at the server) and `RateLimit` (with a fake clock)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from agentgrad.errors import ConfigError
from agentgrad.providers import CallableProvider, ConcurrencyLimit, Message, OpenAICompatible, Provider, RateLimit
from agentgrad.testing.clock import FakeClock
from tests.providers.fake_server import FakeServer
from tests.providers.helpers import USER, RecordingSleep


async def fan_out(provider: Provider, n: int) -> list[str]:
    results = await asyncio.gather(*(provider.complete(USER) for _ in range(n)))
    return [r.text for r in results]


def test_200_calls_in_flight_with_limit_16_never_exceed_16_at_the_server(server: FakeServer) -> None:
    limited = ConcurrencyLimit(OpenAICompatible(server.url + "/v1", model="slow-20ms"), 16)
    texts = asyncio.run(fan_out(limited, 200))
    assert len(texts) == 200 and server.counts["slow-20ms"] == 200
    assert limited.peak == 16 and limited.in_flight == 0
    assert 2 <= server.max_in_flight <= 16


def test_without_a_limit_the_server_does_see_more_than_16(server: FakeServer) -> None:
    asyncio.run(fan_out(OpenAICompatible(server.url + "/v1", model="slow-200ms"), 48))
    assert server.max_in_flight > 16


def test_a_limit_works_again_in_a_new_event_loop() -> None:
    limited = ConcurrencyLimit(CallableProvider(lambda m, **p: "x"), 1)
    assert asyncio.run(fan_out(limited, 3)) == ["x"] * 3
    assert asyncio.run(fan_out(limited, 3)) == ["x"] * 3


def test_rate_limit_lets_a_burst_through_then_spaces_calls_at_the_rate() -> None:
    clock = FakeClock()
    starts: list[float] = []

    def stamp(messages: Sequence[Message], **params: Any) -> str:
        starts.append(clock.now())
        return "x"

    limited = RateLimit(CallableProvider(stamp), rate=10.0, burst=2, clock=clock.now, sleep=RecordingSleep(clock))

    async def calls(n: int) -> None:
        for _ in range(n):
            await limited.complete(USER)

    asyncio.run(calls(6))
    assert starts == pytest.approx([0.0, 0.0, 0.1, 0.2, 0.3, 0.4])
    clock.advance(10.0)
    asyncio.run(calls(3))
    assert starts[6:] == pytest.approx([10.4, 10.4, 10.5])


def test_concurrent_arrivals_reserve_tokens_in_order() -> None:
    clock = FakeClock()
    limited = RateLimit(CallableProvider(lambda m, **p: "x"), rate=4.0, burst=1, clock=clock.now)
    assert [limited.reserve() for _ in range(4)] == pytest.approx([0.0, 0.25, 0.5, 0.75])


@pytest.mark.parametrize("kwargs", [{"rate": 0.0}, {"rate": 1.0, "burst": 0}, {"rate": -1.0}])
def test_rate_limit_refuses_bad_settings(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        RateLimit(CallableProvider(lambda m, **p: "x"), **kwargs)


def test_concurrency_limit_refuses_bad_settings() -> None:
    with pytest.raises(ConfigError):
        ConcurrencyLimit(CallableProvider(lambda m, **p: "x"), 0)


def test_the_provider_never_opens_more_than_max_connections(server: FakeServer) -> None:
    capped = OpenAICompatible(server.url + "/v1", model="slow-20ms", max_connections=12, shard_size=4)
    asyncio.run(fan_out(capped, 60))
    assert server.counts["slow-20ms"] == 60
    assert 2 <= server.max_in_flight <= 12
