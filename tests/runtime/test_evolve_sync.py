"""`evolve` with the synchronous runtime on the reference world: reproducibility, results, and bad input."""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agentgrad.data.splits import Splits
from agentgrad.data.task import Task
from agentgrad.errors import ConfigError, RewardError, RunFailedError, SystemicError
from agentgrad.providers.errors import AuthError
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.config import RunConfig, Workers
from agentgrad.runtime.evolve import evolve
from agentgrad.runtime.gateconfig import GateConfig
from agentgrad.runtime.result import Result
from agentgrad.testing.agents import WorldAgent
from agentgrad.testing.clock import FakeClock
from tests.runtime.helpers import BUDGET, WORLD, agent, check_commits, dispatched, events, run

WORLD_REWARD = WorldAgent.reward


async def _async_reward(task: Task, output: str) -> float:
    return WORLD_REWARD(task, output)


def _sync(store: Path, seed: int = 1) -> Result:
    """A sync run on a fake clock. Every user function is async here: a synchronous one runs in a worker thread,
    and real threads finish in no fixed order, which would reorder the log (not the verdicts)."""
    clock = FakeClock()
    return run(store, agent(median=0.002, clock=clock), clock=clock, asynchronous=False, seed=seed,
               reward=_async_reward)


def test_sync_runs_with_the_same_seed_are_identical(tmp_path: Path) -> None:
    first, second = _sync(tmp_path / "a"), _sync(tmp_path / "b")
    assert [v.text for v in first.history] == [v.text for v in second.history]
    assert len(first.history) > 1
    assert [(d.diff_id, d.outcome, dict(d.numbers)) for d in first.decisions] == \
        [(d.diff_id, d.outcome, dict(d.numbers)) for d in second.decisions]
    assert first.usage == second.usage
    assert first.counts == second.counts
    assert events(tmp_path / "a") == events(tmp_path / "b")  # the whole log, bit for bit


def test_a_different_seed_gives_a_different_run(tmp_path: Path) -> None:
    first, other = _sync(tmp_path / "a", seed=1), _sync(tmp_path / "b", seed=2)
    assert events(tmp_path / "a") != events(tmp_path / "b")
    assert [d.diff_id for d in first.decisions] != [d.diff_id for d in other.decisions] or \
        first.usage != other.usage


def test_held_out_reward_improves_and_commits_are_consistent(tmp_path: Path) -> None:
    result = _sync(tmp_path)
    assert result.ok, result.error
    assert result.baseline_test_reward is not None and result.test_reward is not None
    assert result.test_reward > result.baseline_test_reward + 0.2
    assert check_commits(tmp_path) == [v.diff_id for v in result.history[1:]]
    assert result.usage.gate_share == result.usage.gate_evals / (result.usage.rollouts + result.usage.gate_evals)
    assert 0 < result.usage.gate_share < 1


def test_outcomes_explain_every_proposed_diff(tmp_path: Path) -> None:
    result = _sync(tmp_path)
    proposed = {p["diff"]["id"] for _, p in events(tmp_path, ["proposal"])}
    explained = {o["diff"]: o for o in result.outcomes()}
    assert proposed and proposed <= set(explained)
    assert all(o["reason"] and o["stage"] for o in explained.values())
    accepted = {d.diff_id for d in result.accepted()}
    assert accepted == {v.diff_id for v in result.history[1:]}


def test_usage_matches_the_event_log_and_stays_within_the_budget(tmp_path: Path) -> None:
    result = _sync(tmp_path)
    logged = dispatched(tmp_path)
    assert (result.usage.rollouts, result.usage.proposals, result.usage.gate_evals) == \
        (logged["rollouts"], logged["proposals"], logged["gate_evals"])
    assert logged["rollouts"] <= 48 and logged["proposals"] <= 24 and logged["gate_evals"] <= 400


def test_a_run_without_a_test_split_is_labelled(tmp_path: Path) -> None:
    bot = agent()
    splits = bot.splits()
    result = evolve(Splits(splits.train, splits.val, (), "train/val only"), bot.reward, agent=bot,
                    strategy=WORLD.strategy, artifact=WORLD.artifact, budget=Budget(rollouts=8, gate_evals=100),
                    asynchronous=False, store=tmp_path)
    assert result.ok and result.test_reward is None and result.baseline_test_reward is None
    assert "no test split" in result.protocol and "no test split" in result.summary()
    assert result.usage.test_evals == 0


def test_a_run_whose_every_call_fails_stops_with_a_clear_error(tmp_path: Path) -> None:
    bot = agent(fail_every=1)
    result = run(tmp_path, bot, asynchronous=False)
    assert not result.ok
    assert isinstance(result.error, RunFailedError)
    assert "simulated failure" in str(result.error)
    assert bot.runs < 48  # it stopped early
    assert result.test_reward is None


def test_a_nan_reward_stops_the_run_naming_the_task(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    bot = agent()
    target = WORLD.train[3]

    def reward(task: Task, output: str) -> float:
        return math.nan if task.id == target else bot.reward(task, output)

    result = run(tmp_path, bot, asynchronous=False, reward=reward,
                 budget=Budget(rollouts=len(WORLD.train), gate_evals=400))
    assert isinstance(result.error, RewardError)
    assert target in str(result.error)
    assert [k for k, _ in events(tmp_path, ["failed"])] == ["failed"]
    (logged,) = [r.getMessage() for r in caplog.records if "failed" in r.getMessage()]
    assert "RewardError" in logged and target in logged and "TaskGroup" not in logged  # the real error, unwrapped


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_rejected_key_inside_run_stops_the_run_at_once(tmp_path: Path, asynchronous: bool) -> None:
    bot = agent()
    calls = Counter[str]()

    def run_with_a_bad_key(rendered: str, task: Task) -> str:
        calls["run"] += 1
        raise AuthError("invalid API key", provider="openai http://127.0.0.1:9/v1", path="/chat/completions",
                        status=401)

    result = run(tmp_path, bot, asynchronous=asynchronous, run=run_with_a_bad_key, workers=4,
                 budget=Budget(rollouts=48, gate_evals=400))
    assert isinstance(result.error, AuthError) and "127.0.0.1:9" in str(result.error)
    assert calls["run"] <= 4  # the calls already in flight, and no more
    assert [k for k, _ in events(tmp_path, ["failed"])] == ["failed"]


@pytest.mark.parametrize("proposal", ["lorem ipsum dolor sit amet", "", "   ", "\ud800", "x" * 1_000_000, None, 42,
                                      ["not an edit"], "- geometry: use method 1\x00", "- tip: \x1b[31mred"])
def test_a_garbage_proposal_is_counted_as_invalid_the_run_goes_on_and_nothing_but_garbage_fails_it(
        tmp_path: Path, proposal: Any) -> None:
    bot = agent()

    def propose(rendered: str, task: Task, output: str, reward: float) -> Any:
        return proposal

    result = run(tmp_path, bot, asynchronous=False, propose=propose, budget=Budget(rollouts=12, proposals=6))
    assert not result.ok and "all 6 proposals were unusable" in str(result.error)  # every call was still made
    assert result.counts["invalid_proposals"] == 6
    assert result.usage.proposals == 6
    assert len(result.history) == 1 and result.decisions == ()
    failures = [p for _, p in events(tmp_path, ["proposal_failed"])]
    assert len(failures) == 6 and all(p["kind"] == "invalid_proposals" and p["error"] for p in failures)


def test_a_proposer_that_raises_now_and_then_is_recorded_per_example(tmp_path: Path) -> None:
    bot = agent()
    calls = [0]

    async def propose(rendered: str, task: Task, output: str, reward: float) -> Any:
        calls[0] += 1
        if calls[0] % 2:
            raise RuntimeError("model overloaded")
        return await bot.propose(rendered, task, output, reward)

    result = run(tmp_path, bot, asynchronous=False, propose=propose, budget=Budget(rollouts=8, proposals=4))
    assert result.ok, result.error
    assert result.counts["proposal_errors"] == 2
    assert all("model overloaded" in p["error"] for _, p in events(tmp_path, ["proposal_failed"]
                                                                  ) if p["kind"] == "proposal_errors")


def test_a_proposer_that_always_raises_fails_the_run(tmp_path: Path) -> None:
    def propose(rendered: str, task: Task, output: str, reward: float) -> str:
        raise RuntimeError("model overloaded")

    result = run(tmp_path, agent(), asynchronous=False, propose=propose, budget=Budget(rollouts=8, proposals=4))
    assert not result.ok and "calls of propose failed" in str(result.error)


def test_workers_propose_and_gate_knobs_bound_the_sync_runtime(tmp_path: Path) -> None:
    bot = agent(median=0.002)
    result = run(tmp_path, bot, asynchronous=False, workers=Workers(rollout=8, propose=2, gate=2, slots=3))
    assert result.ok
    assert bot.max_in_flight <= 3 and bot.max_propose_in_flight <= 2
    assert bot.max_in_flight == 3  # the bound was reached, so the check means something


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_run_with_nothing_left_to_learn_stops_instead_of_spinning(tmp_path: Path, asynchronous: bool) -> None:
    bot = agent()

    async def perfect(rendered: str, task: Task) -> str:
        return "solved"

    result = run(tmp_path, bot, run=perfect, budget=Budget(gate_evals=100), asynchronous=asynchronous)
    assert result.ok, result.error
    assert result.usage.proposals == 0 and result.usage.gate_evals == 0
    idle = 2 * len(WORLD.train) + len(WORLD.val)  # two epochs of training tasks, the validation ones once
    assert idle <= result.usage.rollouts < idle + len(WORLD.train)
    assert [k for k, _ in events(tmp_path, ["idle"])] == ["idle"]
    stopped = f"stopped early: {result.counts['idle_stop_rollouts']} rollouts brought no proposal to judge"
    assert stopped in result.summary()


def test_an_early_stop_says_how_many_of_the_budgets_calls_it_left(tmp_path: Path) -> None:
    async def perfect(rendered: str, task: Task) -> str:
        return "solved"

    result = run(tmp_path, agent(), run=perfect, budget=Budget(calls=500), asynchronous=False)
    used = result.usage.rollouts + result.usage.gate_evals
    assert result.usage.run_calls == used and 0 < used < 500
    assert f"; {500 - used} of its 500 calls unused" in result.summary()


def test_a_change_already_under_evaluation_is_not_evaluated_twice(tmp_path: Path) -> None:
    bot = agent()
    rule = f"{WORLD.categories[0]}: use method {WORLD.methods[WORLD.categories[0]]}"

    def propose(rendered: str, task: Task, output: str, reward: float) -> str:
        return rule  # every worker proposes the same change in the same round

    result = run(tmp_path, bot, asynchronous=False, propose=propose, budget=Budget(rollouts=4, proposals=4),
                 workers=Workers(rollout=4, propose=4, gate=4))
    proposals = [p for _, p in events(tmp_path, ["proposal"])]
    skipped = [p for _, p in events(tmp_path, ["proposal_failed"]) if p["kind"] == "in_flight_duplicates"]
    assert len(proposals) == 1 and len(skipped) == result.usage.proposals - 1 > 0
    assert all(proposals[0]["diff"]["id"] in p["error"] for p in skipped)


def test_a_gate_budget_too_small_for_a_whole_round_still_gates_several_candidates_at_once(tmp_path: Path) -> None:
    bot = agent(median=0.001)
    val = {t.id for t in bot.splits().val}
    per_candidate = 1 + 2 * len(val)
    in_flight: Counter[str] = Counter()
    peak = {"texts": 0}

    async def tracked(rendered: str, task: Task) -> str:
        if task.id not in val:
            return await bot.run(rendered, task)
        in_flight[rendered] += 1
        peak["texts"] = max(peak["texts"], len(+in_flight))
        try:
            return await bot.run(rendered, task)
        finally:
            in_flight[rendered] -= 1

    budget = Budget(rollouts=24, gate_evals=per_candidate * 3 + 5)
    result = run(tmp_path, bot, run=tracked, asynchronous=False, budget=budget,
                 workers=Workers(rollout=8, propose=8, gate=8), config=RunConfig(gate=GateConfig(screen=False)))
    assert result.ok and result.usage.gate_evals <= per_candidate * 3 + 5
    assert peak["texts"] >= 3  # the base and at least two candidates on validation tasks at once


def test_a_proposal_outside_the_trust_region_is_refused_before_any_evaluation(tmp_path: Path) -> None:
    bot = agent()

    def propose(rendered: str, task: Task, output: str, reward: float) -> str:
        return f"- {task.id} note: " + "very long advice " * 600  # about 10,000 characters

    result = run(tmp_path, bot, asynchronous=False, propose=propose, budget=Budget(rollouts=12, proposals=4))
    assert result.ok, result.error
    refused = [d for d in result.decisions if d.outcome.value == "too_large"]
    assert len(refused) == result.counts["too_large"] == 4 and all(d.stage == "trust_region" for d in refused)
    assert result.usage.gate_evals == 0  # not one evaluation was spent on them
    assert "changed characters > 4000 allowed" in refused[0].reason


@pytest.mark.parametrize(("change", "says"), [
    ({"budget": 5}, "budget must be a Budget"),
    ({"callbacks": [1]}, "callbacks must be functions"),
    ({"callbacks": None}, "callbacks must be a sequence of object values, got NoneType"),
    ({"config": 3}, "config must be a RunConfig, got int"),
    ({"staleness": 3}, "staleness must be a Staleness, got int"),
], ids=["budget", "callbacks", "callbacks-none", "config", "staleness"])
def test_bad_arguments_to_evolve_are_one_typed_error_naming_the_argument(tmp_path: Path, change: dict[str, Any],
                                                                         says: str) -> None:
    with pytest.raises(ConfigError, match=says) as caught:
        run(tmp_path / "run", agent(), **change)
    assert "\n" not in str(caught.value)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(ConfigError, match=r"cannot use .* as the run directory"):
        run(blocker / "run", agent())


TASKS_CLOCK_STORE = [
    ({"tasks": None}, r"^tasks \(agentgrad.data.Task values.* or a Splits\) must be a sequence .*, got NoneType$"),
    ({"tasks": "tasks"}, r"^tasks \(.*\) must be a sequence of Task values, got str$"),
    ({"tasks": [{"id": "a", "input": "x"}]}, r"^tasks \(.*\) must hold only Task values, got dict at index 0$"),
    ({"clock": 3}, r"^clock \(a function returning seconds\) must be a function, got int$"),
    ({"store": 3}, r"^store must be a path \(str or Path\) to the run directory, got int$"),
    ({"store": "a\x00b"}, r"^cannot use 'a\\x00b' as the run directory \(store=\): embedded null byte$"),
]


@pytest.mark.parametrize(("change", "says"), TASKS_CLOCK_STORE,
                         ids=["tasks-none", "tasks-str", "tasks-dicts", "clock", "store-int", "store-nul"])
def test_tasks_a_clock_or_a_store_of_the_wrong_type_are_one_config_error(tmp_path: Path, change: dict[str, Any],
                                                                          says: str) -> None:
    bot = agent()
    given: dict[str, Any] = {"tasks": bot.splits(), "store": tmp_path, **change}
    with pytest.raises(ConfigError, match=says):
        evolve(given.pop("tasks"), bot.reward, agent=bot, budget=BUDGET, **given)


def test_a_callback_that_raises_stops_the_run_with_a_systemic_error_naming_it(tmp_path: Path) -> None:
    def broken_tracker(kind: str, payload: Any) -> None:
        if kind == "commit" or kind == "verdict":
            raise KeyError("step")

    result = run(tmp_path, agent(), callbacks=[broken_tracker], asynchronous=False)
    assert isinstance(result.error, SystemicError)
    assert re.fullmatch(r"callback .*broken_tracker failed on the '(commit|verdict)' event: KeyError: 'step'",
                        str(result.error))


def test_every_screen_reaches_the_noise_estimate_at_the_next_step(tmp_path: Path) -> None:
    result = run(tmp_path / "run", agent(), asynchronous=False)
    steps = [p for _, p in events(tmp_path / "run", ["step"])]
    screens = [p["noise"].get("screen_room", 0.0) for p in steps]
    assert result.counts["screened_out"] > 0
    assert screens == sorted(screens) and screens[0] == 0.0  # counted from the first step's screens on, never lost
    # every proposal was screened before the gate (passed or not); those of rounds after the last step (a screened
    # out proposal makes no step) reach no step's figures
    logged = [kind for kind, _ in events(tmp_path / "run")]
    late = logged[max(i for i, kind in enumerate(logged) if kind == "step"):].count("proposal")
    assert screens[-1] == result.counts["screened_out"] + result.counts["gated"] - late
    assert all(p["noise"]["screen_wins"] <= p["noise"]["screen_room"] for p in steps)
