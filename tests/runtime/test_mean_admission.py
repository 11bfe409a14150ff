"""GEPA's admission on the engine: a minibatch screen of several training tasks, then the mean over the whole
validation split (`GateConfig.screen_tasks`, `Acceptance(rule="mean")`)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import anyio
import pytest

from agentgrad.core.decision import Outcome
from agentgrad.errors import ConfigError, DataTooSmallError
from agentgrad.optim.stats import SIGN_TEST_PRIOR
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.config import Acceptance, RunConfig
from agentgrad.runtime.gate import Gate
from agentgrad.runtime.gateconfig import GateConfig
from agentgrad.runtime.scheduler import DurationEstimator
from agentgrad.runtime.smalldata import gate_power
from agentgrad.store.sqlite import SQLiteStore
from tests.runtime.helpers import WORLD, agent, check_commits, run

MEAN = RunConfig(acceptance=Acceptance(rule="mean", margin=0.0),
                 gate=GateConfig(screen_tasks=3, early_stop=False, futility=0.0, focus=0, max_examples=None,
                                 pool="val"),
                 asynchronous=False)


class _Scores:
    def __init__(self, table: dict[str, dict[str, float]]) -> None:
        self.table, self.calls = table, Counter[tuple[str, str]]()

    async def __call__(self, text: str, task_id: str) -> float:
        self.calls[(text, task_id)] += 1
        await anyio.sleep(0)
        return self.table[text][task_id]


def _screen(table: dict[str, dict[str, float]], cand: str, others: list[str]) -> tuple[bool, object, _Scores]:
    scores = _Scores(table)
    gate = Gate(scores, ["v"], GateConfig(screen_tasks=1 + len(others)), seed=0, margin=0.0,
                estimator=DurationEstimator())

    async def main() -> tuple[bool, object]:
        return await gate.screen(("base", cand), 0.0, "t0", others)

    passed, seen = anyio.run(main)
    return passed, seen, scores


def test_the_minibatch_screen_passes_on_a_higher_sum_even_when_the_origin_task_is_not_won() -> None:
    table = {"base": {"t1": 0.0, "t2": 1.0}, "cand": {"t0": 0.0, "t1": 1.0, "t2": 1.0}}
    passed, seen, scores = _screen(table, "cand", ["t1", "t2"])
    assert passed and seen == {"t0": (0.0, 0.0), "t1": (0.0, 1.0), "t2": (1.0, 1.0)}
    assert sum(scores.calls.values()) == 5  # the candidate on 3 tasks, the base on the 2 it had no score for


def test_the_minibatch_screen_rejects_an_equal_sum() -> None:
    table = {"base": {"t1": 1.0, "t2": 0.0}, "cand": {"t0": 1.0, "t1": 0.0, "t2": 0.0}}
    passed, _, _ = _screen(table, "cand", ["t1", "t2"])
    assert not passed


def test_a_mean_admission_run_commits_on_the_whole_validation_split_and_screens_on_minibatches(
        tmp_path: Path) -> None:
    result = run(tmp_path / "run", agent(), config=MEAN, budget=Budget(calls=300), workers=2)
    assert result.error is None and len(result.history) >= 2
    check_commits(tmp_path / "run")
    n_val = len(agent().splits().val)
    with SQLiteStore(tmp_path / "run", git=False) as store:
        accepted = store.decisions(outcome=Outcome.ACCEPTED)
        rejected = store.decisions(outcome=Outcome.REJECTED)
    # each on the whole split; a fused change is judged on its members' evidence together (a whole split each)
    assert accepted and all(d.numbers["n"] % n_val == 0 and d.numbers["mean_gain"] > 0 for d in accepted)
    assert all(d.numbers["n"] == n_val for d in accepted if d.diff_id.startswith("p"))
    screened = [d for d in rejected if d.stage == "gate" and "minibatch of 3" in d.reason]
    assert all(d.numbers["n"] == 3 for d in screened)


def test_mean_admission_with_an_early_stopping_gate_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"GateConfig\(early_stop=False\)"):
        RunConfig(acceptance=Acceptance(rule="mean"))
    with pytest.raises(ConfigError, match=r"Acceptance\.rule"):
        Acceptance(rule="median")
    with pytest.raises(ConfigError, match="screen_tasks"):
        GateConfig(screen_tasks=0)


def test_one_validation_task_is_enough_for_the_mean_rule_and_too_few_for_the_sign_test() -> None:
    gate = GateConfig(pool="val", max_examples=None)
    assert gate_power(n_val=1, n_train=10, gate=gate, delta=0.035, margin=0.02, prior=SIGN_TEST_PRIOR,
                      rule="mean").need == 1
    with pytest.raises(DataTooSmallError):
        gate_power(n_val=1, n_train=10, gate=gate, delta=0.035, margin=0.02, prior=SIGN_TEST_PRIOR)


def test_world_is_large_enough_for_the_run_above() -> None:
    assert len(WORLD.tasks) >= 100
