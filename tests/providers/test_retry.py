"""Tests of `Retry`: what is retried, how long it waits, and that permanent errors and bugs fail fast."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgrad.errors import ConfigError
from agentgrad.providers import (
    CallableProvider,
    CircuitOpen,
    Completion,
    ConcurrencyLimit,
    MalformedResponse,
    Message,
    OpenAICompatible,
    Provider,
    Retry,
    ServerError,
)
from tests.providers.fake_server import FakeServer
from tests.providers.helpers import USER, RecordingSleep


def http(server: FakeServer, model: str) -> OpenAICompatible:
    return OpenAICompatible(server.url + "/v1", model=model)


def run(provider: Provider) -> Completion:
    return asyncio.run(provider.complete(USER))


def test_server_errors_are_retried_with_exponential_backoff(server: FakeServer) -> None:
    sleep = RecordingSleep()
    result = run(Retry(http(server, "fail-2-then-ok"), base=0.5, jitter=0.0, sleep=sleep))
    assert result.text == "echo: hello brave new world"
    assert server.counts["fail-2-then-ok"] == 3
    assert sleep.waits == [0.5, 1.0]


def test_a_429_waits_exactly_its_retry_after(server: FakeServer) -> None:
    sleep = RecordingSleep()
    result = run(Retry(http(server, "rate-limit-then-ok"), sleep=sleep))
    assert result.model == "rate-limit-then-ok"
    assert sleep.waits == [3.0]
    assert server.counts["rate-limit-then-ok"] == 2


def test_a_retry_after_longer_than_the_cap_waits_the_cap(server: FakeServer) -> None:
    sleep = RecordingSleep()
    run(Retry(http(server, "rate-limit-then-ok"), cap=1.0, sleep=sleep))
    assert sleep.waits == [1.0]


def test_the_budget_is_per_call_and_the_error_says_how_many_attempts(server: FakeServer) -> None:
    sleep = RecordingSleep()
    stack = Retry(http(server, "err-500"), attempts=4, sleep=sleep)
    with pytest.raises(ServerError) as info:
        run(stack)
    assert server.counts["err-500"] == 4
    assert info.value.attempts == 4 and "after 4 attempts" in str(info.value)
    assert len(sleep.waits) == 3
    assert stack.stats() == {"calls": 1, "failed_server": 4, "retries": 3, "gave_up": 1}


def test_malformed_answers_are_retried_less_than_other_faults(server: FakeServer) -> None:
    sleep = RecordingSleep()
    with pytest.raises(MalformedResponse):
        run(Retry(http(server, "malformed"), attempts=5, malformed_attempts=2, sleep=sleep))
    assert server.counts["malformed"] == 2


@pytest.mark.parametrize("model", ["err-401", "err-403", "err-404", "err-400"])
def test_permanent_errors_make_exactly_one_request(server: FakeServer, model: str) -> None:
    sleep = RecordingSleep()
    with pytest.raises(Exception, match=model):
        run(Retry(http(server, model), sleep=sleep))
    assert server.counts[model] == 1 and sleep.waits == []


def test_a_bug_in_the_inner_code_is_never_retried() -> None:
    calls: list[int] = []

    def grader_bug(messages: Sequence[Message], **params: Any) -> str:
        calls.append(1)
        scores = {"score": "1"}
        return scores["scroe"]  # a typo: KeyError

    with pytest.raises(KeyError):
        run(Retry(CallableProvider(grader_bug), sleep=RecordingSleep()))
    assert calls == [1]


def test_circuit_open_is_not_retried() -> None:
    calls: list[int] = []

    def refuse(messages: Sequence[Message], **params: Any) -> str:
        calls.append(1)
        raise CircuitOpen("open", retry_after=5.0)

    with pytest.raises(CircuitOpen):
        run(Retry(CallableProvider(refuse), sleep=RecordingSleep()))
    assert calls == [1]


def test_nesting_retry_is_refused_even_through_other_layers() -> None:
    inner = ConcurrencyLimit(Retry(CallableProvider(lambda m, **p: "x")), 4)
    with pytest.raises(ConfigError, match="nested retries"):
        Retry(inner)


@settings(derandomize=True, max_examples=60, deadline=None)
@given(retry=st.integers(0, 12), jitter=st.floats(0, 1), seed=st.integers(0, 2**16))
def test_backoff_stays_within_its_jitter_band_and_the_cap(retry: int, jitter: float, seed: int) -> None:
    policy = Retry(CallableProvider(lambda m, **p: "x"), base=0.5, cap=30.0, jitter=jitter, rng=random.Random(seed))
    full = min(30.0, 0.5 * 2.0 ** retry)
    wait = policy.delay(ServerError("x"), retry)
    assert full * (1 - jitter) - 1e-9 <= wait <= full + 1e-9
