"""Scheduling: the duration estimator (estimates, stragglers, longest-first order, state) and where the runtime
uses it (straggler counts in a run, longest-first starts in a synchronous round)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgrad.data.splits import Splits
from agentgrad.data.task import Task
from agentgrad.errors import ConfigError, StateDictError
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.config import RunConfig, Workers
from agentgrad.runtime.evolve import evolve
from agentgrad.runtime.gateconfig import GateConfig
from agentgrad.runtime.scheduler import DurationEstimator, seeded_order
from agentgrad.runtime.sync_loop import run_round, start_order
from agentgrad.testing.agents import WorldAgent
from agentgrad.testing.clock import FakeClock
from tests.runtime.helpers import WORLD, build_engine, events, run


def test_an_unseen_task_is_estimated_at_the_overall_mean() -> None:
    estimator = DurationEstimator()
    assert estimator.estimate("new") == 0.0
    estimator.observe("a", 1.0)
    estimator.observe("b", 3.0)
    assert estimator.estimate("new") == pytest.approx(2.0)
    assert estimator.estimate("a") == 1.0 and estimator.estimate("b") == 3.0  # a first observation is taken as is


def test_the_estimate_moves_by_the_weight_towards_each_new_observation() -> None:
    estimator = DurationEstimator(weight=0.25)
    estimator.observe("t", 2.0)
    estimator.observe("t", 6.0)
    assert estimator.estimate("t") == pytest.approx(2.0 + 0.25 * 4.0)
    estimator.observe("t", 1.0)
    assert estimator.estimate("t") == pytest.approx(3.0 + 0.25 * -2.0)
    assert estimator.overall == pytest.approx(3.0) and estimator.seen == 3  # the plain mean of every call


def test_a_first_observation_is_never_a_straggler() -> None:
    estimator = DurationEstimator()
    estimator.observe("fast", 0.01)
    assert not estimator.observe("slow", 1000.0)  # far above the overall mean, but the task was never seen
    assert estimator.stragglers == 0


def test_a_call_slower_than_the_factor_times_its_estimate_is_a_straggler() -> None:
    estimator = DurationEstimator(weight=0.5, straggler_factor=3.0)
    estimator.observe("t", 1.0)
    assert not estimator.observe("t", 3.0)  # exactly the factor: not slower than it
    estimate = estimator.estimate("t")
    assert estimate == pytest.approx(2.0)
    assert estimator.observe("t", 3.0 * estimate + 0.01)
    assert estimator.stragglers == 1


def test_a_task_under_a_millisecond_never_makes_a_straggler() -> None:
    estimator = DurationEstimator()
    estimator.observe("t", 0.0005)
    assert not estimator.observe("t", 0.5)  # a thousand times slower, but the estimate is noise-level
    assert estimator.stragglers == 0


@settings(max_examples=60, derandomize=True, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from([0.0005, 0.01, 0.05, 0.2, 1.0])), max_size=30))
def test_a_straggler_is_exactly_a_call_slower_than_the_factor_times_its_task_estimate(
        calls: list[tuple[str, float]]) -> None:
    estimator = DurationEstimator()
    expected = 0
    for task, seconds in calls:
        before = estimator.means.get(task)
        straggler = before is not None and before > 1e-3 and seconds > 3.0 * before
        expected += straggler
        assert estimator.observe(task, seconds) == straggler
    assert estimator.stragglers == expected


def test_longest_first_orders_by_decreasing_estimate_and_keeps_ties_in_their_order() -> None:
    estimator = DurationEstimator(weight=1.0)
    for task, seconds in (("a", 1.0), ("b", 5.0), ("c", 1.0), ("d", 3.0)):
        estimator.observe(task, seconds)
    # the overall mean is 2.5: the unseen tasks x and y sit between d and a, in their given order
    assert estimator.longest_first(["c", "x", "a", "b", "y", "d"]) == ["b", "d", "x", "y", "c", "a"]
    assert estimator.longest_first(["a", "c"]) == ["a", "c"] and estimator.longest_first(["c", "a"]) == ["c", "a"]


@settings(max_examples=60, derandomize=True, deadline=None)
@given(st.dictionaries(st.sampled_from("abcdef"), st.sampled_from([0.1, 0.5, 2.0])),
       st.lists(st.sampled_from("abcdefgh"), max_size=12))
def test_longest_first_is_a_stable_permutation(observed: dict[str, float], ids: list[str]) -> None:
    estimator = DurationEstimator()
    for task, seconds in observed.items():
        estimator.observe(task, seconds)
    ordered = estimator.longest_first(ids)
    assert Counter(ordered) == Counter(ids)
    estimates = [estimator.estimate(t) for t in ordered]
    assert estimates == sorted(estimates, reverse=True)
    for level in set(estimates):  # within a tie, the given order
        assert [t for t in ordered if estimator.estimate(t) == level] == \
            [t for t in ids if estimator.estimate(t) == level]


def test_the_estimator_round_trips_through_a_json_state_dict() -> None:
    estimator = DurationEstimator()
    for task, seconds in (("a", 0.2), ("b", 0.1), ("a", 0.9), ("a", 0.1)):
        estimator.observe(task, seconds)
    restored = DurationEstimator()
    restored.load_state_dict(json.loads(json.dumps(estimator.state_dict())))
    assert restored.state_dict() == estimator.state_dict()
    assert restored.longest_first(["b", "a", "z"]) == estimator.longest_first(["b", "a", "z"])
    assert restored.observe("a", 10.0) == estimator.observe("a", 10.0) is True


@pytest.mark.parametrize("change", [
    {"means": None}, {"means": [1, 2]}, {"means": {"a": "slow"}}, {"means": {"a": -1.0}},
    {"means": {"a": float("nan")}}, {"overall": float("inf")}, {"overall": "x"}, {"seen": 1.5}, {"seen": -1},
    {"stragglers": True}, {"seen": None}])
def test_a_malformed_state_raises_and_changes_nothing(change: dict[str, Any]) -> None:
    estimator = DurationEstimator()
    estimator.observe("a", 0.5)
    before = estimator.state_dict()
    with pytest.raises(StateDictError, match="duration estimator"):
        estimator.load_state_dict({**before, **change})
    assert estimator.state_dict() == before


@pytest.mark.parametrize("key", ["means", "overall", "seen", "stragglers"])
def test_a_state_missing_a_field_raises(key: str) -> None:
    state = DurationEstimator().state_dict()
    del state[key]
    with pytest.raises(StateDictError, match=key):
        DurationEstimator().load_state_dict(state)


@pytest.mark.parametrize("options", [{"weight": 0.0}, {"weight": 1.5}, {"straggler_factor": 1.0},
                                     {"straggler_factor": float("inf")}, {"weight": True}])
def test_bad_estimator_settings_are_refused(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="DurationEstimator"):
        DurationEstimator(**options)


def test_a_seeded_order_depends_only_on_seed_and_salt() -> None:
    items = [f"t{i}" for i in range(20)]
    assert seeded_order(items, seed=3, salt="x") == seeded_order(list(reversed(items)), seed=3, salt="x")
    assert sorted(seeded_order(items, seed=3, salt="x")) == sorted(items)
    assert seeded_order(items, seed=3, salt="x") != seeded_order(items, seed=3, salt="y")
    assert seeded_order(items, seed=3, salt="x") != seeded_order(items, seed=4, salt="x")


# -- in a run ------------------------------------------------------------------------------------------------------

async def _reward(task: Task, output: str) -> float:
    return WorldAgent.reward(task, output)


def _timed_run(store: Path, *, slow_later: bool) -> tuple[dict[str, int], list[tuple[str, dict[str, Any]]]]:
    """A synchronous run on a fake clock with one `run` slot (so each measured duration is exactly the call's own
    latency): 0.01 s per call, and with `slow_later`, 0.1 s for every call on a task after its first."""
    clock = FakeClock()
    bot = WorldAgent(WORLD)
    seen: Counter[str] = Counter()

    async def timed(rendered: str, task: Task) -> str:
        seen[task.id] += 1
        await clock.sleep(0.1 if slow_later and seen[task.id] > 1 else 0.01)
        return await bot.run(rendered, task)

    result = run(store, bot, run=timed, reward=_reward, clock=clock, asynchronous=False,
                 workers=Workers(rollout=2, propose=1, gate=1, slots=1),
                 budget=Budget(rollouts=24, proposals=12, gate_evals=160))
    assert result.ok, result.error
    return dict(result.counts), events(store, ["done"])


def test_a_run_counts_the_calls_that_become_ten_times_slower_as_stragglers(tmp_path: Path) -> None:
    counts, done = _timed_run(tmp_path / "slow", slow_later=True)
    observed = Counter(p["task"] for _, p in done if p["kind"] in ("rollouts", "gate_evals"))
    repeated = sum(1 for n in observed.values() if n >= 2)
    # each repeated task has one straggler, its second call (0.1 s against 0.01 s); later calls only pull the
    # estimate up towards 0.1 s, so they stay under three times it
    assert repeated > 0
    assert counts["stragglers"] == repeated
    steady, _ = _timed_run(tmp_path / "steady", slow_later=False)
    assert steady.get("stragglers", 0) == 0


class _Recording(WorldAgent):
    """The world's agent, noting the task of each `run` call as it starts."""

    def __init__(self) -> None:
        super().__init__(WORLD)
        self.started: list[str] = []

    async def run(self, rendered: str, task: Task) -> str:
        self.started.append(task.id)
        await anyio.sleep(0)
        return await super().run(rendered, task)


def _round_starts(store: Path, slots: int) -> tuple[list[str], list[str]]:
    """One synchronous round of four rollouts (no proposals) whose tasks the estimator already knows, slowest
    last in worker order; returns the tasks in worker order and in the order their calls started."""
    bot = _Recording()
    config = RunConfig(asynchronous=False, workers=Workers(rollout=4, propose=1, gate=1, slots=slots))

    async def main() -> list[str]:
        engine = build_engine(store, bot, config=config, budget=Budget(rollouts=4, proposals=0))
        try:
            tasks = [engine.pacing.pick_task(w) for w in range(4)]
            for position, task in enumerate(tasks):
                engine.estimator.observe(task, 1.0 + position)
            assert await run_round(engine, 0, []) == []
            assert engine.journal.counts["rollouts"] == 4
            return tasks
        finally:
            engine.store.close()
            engine.journal.events.close()

    return anyio.run(main), bot.started


def test_a_round_with_more_rollouts_than_slots_starts_the_longest_first(tmp_path: Path) -> None:
    tasks, started = _round_starts(tmp_path, slots=1)
    assert started == list(reversed(tasks))  # by decreasing estimate, and the same tasks


def test_a_round_with_a_slot_per_rollout_starts_in_worker_order(tmp_path: Path) -> None:
    tasks, started = _round_starts(tmp_path, slots=4)
    assert started == tasks


def test_the_start_order_is_a_stable_permutation_even_with_repeated_tasks(tmp_path: Path) -> None:
    async def main() -> list[int]:
        engine = build_engine(tmp_path, _Recording(),
                              config=RunConfig(asynchronous=False, workers=Workers(rollout=5, slots=2)))
        try:
            engine.estimator.observe("slow", 5.0)
            engine.estimator.observe("fast", 1.0)
            return start_order(engine, ["fast", "slow", "new", "slow", "fast"])
        finally:
            engine.store.close()
            engine.journal.events.close()

    # the unseen task sits at the overall mean (3.0), between the two; ties keep worker order
    assert anyio.run(main) == [1, 3, 2, 0, 4]


TRAIN = 8  # a short epoch, so tasks come back and their estimates differ


def _sync_with_scarce_slots(store: Path) -> list[tuple[str, dict[str, Any]]]:
    """A synchronous run with 4 rollouts a round on 2 run slots, on a fake clock with lognormal latencies (every rollout
    a call: none is served from a gate run's output)."""
    clock = FakeClock()
    bot = WorldAgent(WORLD, median=0.002, sleep=clock.sleep)
    whole = bot.splits()
    result = evolve(Splits(whole.train[:TRAIN], whole.val, whole.test, "short train"), _reward, run=bot.run,
                    propose=bot.propose, strategy=WORLD.strategy, artifact=WORLD.artifact, store=store, seed=1,
                    clock=clock.now, asynchronous=False, workers=Workers(rollout=4, propose=2, gate=2, slots=2),
                    budget=Budget(rollouts=40, proposals=16, gate_evals=240),
                    config=RunConfig(reuse_outputs=False, gate=GateConfig(pool="val")))  # rollouts: training tasks
    assert result.ok, result.error
    return events(store)


def test_a_sync_run_that_starts_rollouts_longest_first_is_still_reproducible(tmp_path: Path) -> None:
    first, second = _sync_with_scarce_slots(tmp_path / "a"), _sync_with_scarce_slots(tmp_path / "b")
    assert first == second  # the whole log, bit for bit
    rollouts = {p["call"]: p["task"] for kind, p in first if kind == "done" and p["kind"] == "rollouts"}
    started = [rollouts[call] for call in sorted(rollouts)]
    logged = [p for kind, p in first if kind == "rollout"]  # in the order they finished, with their worker
    assert len(started) == len(logged) == 40
    rounds = []
    for i in range(0, 40, 4):
        by_worker = sorted(logged[i:i + 4], key=lambda p: int(p["worker"].split("-")[1]))
        rounds.append((started[i:i + 4], [p["task"] for p in by_worker]))
    assert all(sorted(run) == sorted(planned) for run, planned in rounds)  # each round ran its own tasks ...
    assert any(run != planned for run, planned in rounds)  # ... but not always in worker order
