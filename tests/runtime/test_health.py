"""Run health: failures are evidence until the run is clearly broken (never worked, or an outage)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from agentgrad import Budget, Task, evolve
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


def test_a_proposer_that_never_answers_stops_the_run_after_its_first_calls() -> None:
    health = RunHealth(2, Counter())
    for _ in range(7):
        health.proposed("TypeError: bad signature")
    with pytest.raises(RunFailedError, match="first 8 calls of propose all failed; the first error was: TypeError"):
        health.proposed("TypeError: bad signature")


def test_a_proposer_that_answered_once_is_only_stopped_by_a_long_streak() -> None:
    health = RunHealth(2, Counter())
    health.proposed(None)
    for _ in range(31):
        health.proposed("timeout")
    with pytest.raises(RunFailedError, match="last 32 calls of propose all failed"):
        health.proposed("timeout")


def test_a_run_whose_every_proposal_failed_ends_as_a_failure(tmp_path: Path) -> None:
    def broken(skill: str, task: Task, output: object, reward: float) -> str:
        raise TypeError("the proposer has a bug")

    tasks = [Task(f"t{i}", f"q{i}", "a") for i in range(20)]
    result = evolve(tasks, lambda task, output: 0.0, run=lambda skill, task: "b", propose=broken,
                    budget=Budget(calls=40), store=tmp_path / "run", asynchronous=False)
    assert not result.ok and isinstance(result.error, RunFailedError)
    assert "calls of propose all failed" in str(result.error) and "the proposer has a bug" in str(result.error)


def test_a_run_whose_every_proposal_was_unusable_ends_as_a_failure(tmp_path: Path) -> None:
    tasks = [Task(f"t{i}", f"q{i}", "a") for i in range(20)]
    result = evolve(tasks, lambda task, output: 0.0, run=lambda skill, task: "b",
                    propose=lambda *args: {"nope": "x", "other": 1}, budget=Budget(calls=40), store=tmp_path / "run",
                    asynchronous=False)
    assert not result.ok and isinstance(result.error, RunFailedError)
    assert "proposals were unusable" in str(result.error) and "nope" in str(result.error)
