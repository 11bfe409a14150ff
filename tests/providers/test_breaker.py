"""Tests of `CircuitBreaker` with a fake clock: opening, failing fast, half-opening, closing."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from agentgrad.providers import (
    AuthError,
    CallableProvider,
    CircuitBreaker,
    CircuitOpen,
    Message,
    OpenAICompatible,
    ServerError,
)
from agentgrad.testing.clock import FakeClock
from tests.providers.fake_server import FakeServer
from tests.providers.helpers import USER


class Flaky:
    """A provider body whose next outcome the test sets: "ok", "down" (transient) or "auth" (permanent)."""

    def __init__(self) -> None:
        self.mode = "down"
        self.calls = 0

    def __call__(self, messages: Sequence[Message], **params: Any) -> str:
        self.calls += 1
        if self.mode == "down":
            raise ServerError("down", status=503)
        if self.mode == "auth":
            raise AuthError("bad key", status=401)
        return "fine"


def attempt(breaker: CircuitBreaker) -> str:
    try:
        return asyncio.run(breaker.complete(USER)).text
    except (ServerError, AuthError, CircuitOpen) as err:
        return err.kind


def make(failures: int = 3, reset_after: float = 10.0) -> tuple[Flaky, FakeClock, CircuitBreaker]:
    flaky, clock = Flaky(), FakeClock()
    return flaky, clock, CircuitBreaker(CallableProvider(flaky), failures=failures, reset_after=reset_after,
                                        clock=clock.now)


def test_it_opens_after_n_consecutive_transient_failures_and_then_fails_fast() -> None:
    flaky, _, breaker = make(failures=3)
    assert [attempt(breaker) for _ in range(3)] == ["server"] * 3
    assert breaker.state == "open"
    assert attempt(breaker) == "circuit_open"
    assert flaky.calls == 3


def test_the_open_error_says_when_it_half_opens() -> None:
    _, clock, breaker = make(failures=1, reset_after=10.0)
    attempt(breaker)
    clock.advance(4.0)
    with pytest.raises(CircuitOpen) as info:
        asyncio.run(breaker.complete(USER))
    assert info.value.retry_after == pytest.approx(6.0)


def test_after_reset_after_one_trial_goes_through_and_success_closes_it() -> None:
    flaky, clock, breaker = make(failures=2, reset_after=10.0)
    attempt(breaker), attempt(breaker)
    clock.advance(10.0)
    assert breaker.state == "half_open"
    flaky.mode = "ok"
    assert attempt(breaker) == "fine"
    assert breaker.state == "closed"
    assert flaky.calls == 3


def test_a_failed_trial_opens_it_again_for_a_full_period() -> None:
    flaky, clock, breaker = make(failures=2, reset_after=10.0)
    attempt(breaker), attempt(breaker)
    clock.advance(10.0)
    assert attempt(breaker) == "server"
    assert breaker.state == "open"
    clock.advance(9.0)
    assert attempt(breaker) == "circuit_open"
    assert flaky.calls == 3


def test_only_one_trial_is_in_flight_while_half_open() -> None:
    gate = asyncio.Event()
    calls: list[int] = []

    async def slow_ok(messages: Sequence[Message], **params: Any) -> str:
        calls.append(1)
        if len(calls) == 1:
            raise ServerError("down")
        await gate.wait()
        return "fine"

    clock = FakeClock()
    breaker = CircuitBreaker(CallableProvider(slow_ok), failures=1, reset_after=5.0, clock=clock.now)

    async def scenario() -> list[str]:
        with pytest.raises(ServerError):
            await breaker.complete(USER)
        clock.advance(5.0)
        trial = asyncio.create_task(breaker.complete(USER))
        await asyncio.sleep(0)
        with pytest.raises(CircuitOpen, match="trial"):
            await breaker.complete(USER)
        gate.set()
        return [(await trial).text, breaker.state]

    assert asyncio.run(scenario()) == ["fine", "closed"]
    assert len(calls) == 2


def test_permanent_errors_do_not_open_the_circuit() -> None:
    flaky, _, breaker = make(failures=2)
    flaky.mode = "auth"
    assert [attempt(breaker) for _ in range(5)] == ["auth"] * 5
    assert breaker.state == "closed"


def test_a_success_resets_the_consecutive_count() -> None:
    flaky, _, breaker = make(failures=3)
    attempt(breaker), attempt(breaker)
    flaky.mode = "ok"
    attempt(breaker)
    flaky.mode = "down"
    attempt(breaker), attempt(breaker)
    assert breaker.state == "closed"


def test_an_open_circuit_sends_nothing_to_the_server(server: FakeServer) -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(OpenAICompatible(server.url + "/v1", model="err-500"), failures=5, clock=clock.now)
    outcomes = [attempt(breaker) for _ in range(8)]
    assert outcomes == ["server"] * 5 + ["circuit_open"] * 3
    assert server.counts["err-500"] == 5


def test_a_breaker_that_opens_on_silence_only_is_not_opened_by_rate_limits() -> None:
    from agentgrad.providers.errors import ConnectionLost, ProviderTimeout, RateLimitError

    calls = {"n": 0}

    def limited(messages: Any, **params: Any) -> str:
        calls["n"] += 1
        raise RateLimitError("slow down", status=429)

    breaker = CircuitBreaker(CallableProvider(limited), failures=2, opens_on=(ProviderTimeout, ConnectionLost))
    for _ in range(5):
        with pytest.raises(RateLimitError):
            asyncio.run(breaker.complete(USER))
    assert breaker.state == "closed" and calls["n"] == 5
