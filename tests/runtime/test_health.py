"""Run health: failures are evidence until the run is clearly broken (never worked, or an outage)."""

from __future__ import annotations

from collections import Counter

import pytest

from agentgrad.errors import RunFailedError
from agentgrad.runtime.health import RunHealth


def test_a_run_that_never_worked_stops_after_its_first_failures() -> None:
    health = RunHealth(2, Counter())
    for _ in range(7):
        health.observe("boom")
    with pytest.raises(RunFailedError, match="first 8 calls of run all failed; the first error was: boom"):
        health.observe("later")


def test_scattered_failures_are_only_evidence() -> None:
    counts: Counter[str] = Counter()
    health = RunHealth(4, counts)
    for i in range(1000):
        health.observe("flaky" if i % 3 else None)
    assert counts["run_errors"] == 666 and counts["run_ok"] == 334


def test_an_outage_after_successes_stops_with_the_first_error_of_the_streak() -> None:
    health = RunHealth(16, Counter())
    health.observe(None)
    for i in range(63):
        health.observe(f"down {i}")
    with pytest.raises(RunFailedError, match=r"last 64 calls of run all failed, after 1 .* failed with: down 0"):
        health.observe("down 63")


def test_one_success_resets_the_streak() -> None:
    health = RunHealth(1, Counter())
    health.observe(None)
    for _ in range(31):
        health.observe("down")
    health.observe(None)
    for _ in range(31):
        health.observe("down again")
    assert health.streak == 31


def test_a_run_that_ends_with_every_call_failed_is_a_failure_not_a_success() -> None:
    counts: Counter[str] = Counter()
    health = RunHealth(64, counts)  # a wide run: its thresholds are far off
    for _ in range(10):
        health.observe("AuthError: bad key")
    with pytest.raises(RunFailedError, match=r"all 10 calls of run failed.*bad key"):
        health.at_end()
    health.observe(None)
    health.at_end()  # one call worked: what failed is evidence
