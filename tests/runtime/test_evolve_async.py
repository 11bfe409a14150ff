"""`evolve` with the asynchronous runtime: replay from the log, concurrency bounds, stale-diff policies."""

from __future__ import annotations

import itertools
import json
import sqlite3
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentgrad.core.artifact import Layer
from agentgrad.core.decision import Outcome
from agentgrad.data.task import Task
from agentgrad.errors import RewardError, RunFailedError
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.config import RunConfig, Staleness, StalePolicy, Workers
from agentgrad.runtime.gateconfig import GateConfig
from agentgrad.runtime.result import Result
from agentgrad.store.sqlite import SQLiteStore
from agentgrad.testing.agents import WorldAgent
from tests.runtime.helpers import WORLD, agent, check_commits, dispatched, events, replay_store, run

STALE_BUDGET = Budget(rollouts=64, proposals=40, gate_evals=600)


def test_an_async_run_replays_from_its_event_log_with_identical_verdicts(tmp_path: Path) -> None:
    result = run(tmp_path, agent(median=0.001))
    assert result.ok, result.error
    report = replay_store(tmp_path)
    assert report.identical, report.mismatches
    assert report.steps == len(events(tmp_path, ["step"])) > 1
    assert report.verdicts == len([p for _, p in events(tmp_path, ["decision"]) if "step" in p])
    assert len(result.history) > 1
    check_commits(tmp_path)


def test_replay_notices_a_log_that_does_not_match_the_run(tmp_path: Path) -> None:
    run(tmp_path, agent(median=0.001))
    conn = sqlite3.connect(tmp_path / "agentgrad.db")
    row = conn.execute("SELECT seq, payload FROM events WHERE kind = 'decision' AND payload LIKE '%\"step\"%' "
                       "AND payload LIKE '%\"accepted\"%' ORDER BY seq LIMIT 1").fetchone()
    payload = json.loads(row[1])
    payload["outcome"] = Outcome.REJECTED.value
    conn.execute("UPDATE events SET payload = ? WHERE seq = ?", (json.dumps(payload), row[0]))
    conn.commit()
    conn.close()
    assert not replay_store(tmp_path).identical


def test_the_users_run_never_sees_more_concurrency_than_its_slots(tmp_path: Path) -> None:
    bot = agent(median=0.002)
    result = run(tmp_path, bot, workers=Workers(rollout=8, propose=2, gate=4, slots=3))
    assert result.ok, result.error
    assert bot.max_in_flight == 3  # reached, never exceeded
    assert bot.max_propose_in_flight <= 2


def test_async_usage_matches_the_log_and_every_call_is_settled(tmp_path: Path) -> None:
    result = run(tmp_path, agent(median=0.001))
    logged = dispatched(tmp_path)
    assert (result.usage.rollouts, result.usage.proposals, result.usage.gate_evals) == \
        (logged["rollouts"], logged["proposals"], logged["gate_evals"])
    assert len(events(tmp_path, ["done"])) == len(events(tmp_path, ["dispatch"]))  # every call was settled


def test_outcomes_explain_every_async_proposal(tmp_path: Path) -> None:
    result = run(tmp_path, agent(median=0.001))
    proposed = {p["diff"]["id"] for _, p in events(tmp_path, ["proposal"])}
    assert proposed <= {o["diff"] for o in result.outcomes()}


def _stale_run(tmp_path: Path, policy: StalePolicy, bot: WorldAgent) -> Result:
    """Workers never refresh their snapshot and no lag is tolerated: every diff made before a commit is stale."""
    repair = bot.repair if policy is StalePolicy.REPAIR else None
    staleness = Staleness(async_ratio=10_000, alpha_max=0, policy=policy, repair=repair)
    return run(tmp_path, bot, staleness=staleness, budget=STALE_BUDGET)


def _stale_verdicts(result: Result) -> list[str]:
    return [d.reason for d in result.decisions if d.outcome is Outcome.STALE]


def test_discard_drops_stale_diffs_and_never_repairs(tmp_path: Path) -> None:
    bot = agent(median=0.001)
    result = _stale_run(tmp_path, StalePolicy.DISCARD, bot)
    assert result.ok, result.error
    assert any("lag" in reason for reason in _stale_verdicts(result))
    assert bot.repairs == [] and events(tmp_path, ["repair"]) == []


def test_keep_rebases_stale_diffs_whatever_their_lag(tmp_path: Path) -> None:
    bot = agent(median=0.001)
    result = _stale_run(tmp_path, StalePolicy.KEEP, bot)
    assert result.ok, result.error
    assert not any("lag" in reason for reason in _stale_verdicts(result))
    assert result.counts["rebased_before_gate"] > 0
    assert bot.repairs == []


def test_repair_hands_stale_diffs_to_the_callback_and_rechecks_its_result(tmp_path: Path) -> None:
    bot = agent(median=0.001)
    result = _stale_run(tmp_path, StalePolicy.REPAIR, bot)
    assert result.ok, result.error
    repairs = [p for _, p in events(tmp_path, ["repair"])]
    assert bot.repairs and len(repairs) == len(bot.repairs)
    with SQLiteStore(tmp_path, git=False) as lib:
        heads = {v.text for v in lib.history(WORLD.artifact.id)}
    assert all(text in heads for _, text in bot.repairs)  # it was shown a committed head
    repaired = [p["repaired"] for p in repairs if p["repaired"] is not None]
    assert repaired and all(r.endswith("-repair") for r in repaired)
    explained = {o["diff"]: o for o in result.outcomes()}
    assert all(r in explained for r in repaired)  # each repaired diff went through the gate again
    proposals = {p["diff"]["id"]: p for _, p in events(tmp_path, ["proposal"])}
    assert all(proposals[r]["repair_of"] + "-repair" == r for r in repaired)
    check_commits(tmp_path)


def test_a_slow_gate_holds_rollouts_and_proposals_back(tmp_path: Path) -> None:
    """Rollouts and proposals are instant, gate evaluations slow: bounded channels stop the fast stages from
    running ahead, so when the gate budget is spent only a few proposals were made (not hundreds)."""
    bot = agent()
    val = set(WORLD.val)
    open_now: set[str] = set()
    most = {"open": 0}

    async def run_fn(rendered: str, task: Task) -> str:
        if task.id in val:
            await anyio.sleep(0.003)
            return await bot.run(rendered, task)
        return "failed"

    numbers = itertools.count()

    def propose(rendered: str, task: Task, output: str, reward: float) -> str:
        return f"tip {next(numbers)}: note {task.id}"  # a new rule every time, so each one goes to the gate

    def watch(kind: str, payload: Mapping[str, Any]) -> None:
        if kind == "proposal":
            open_now.add(payload["diff"]["id"])
        elif kind == "decision":
            open_now.discard(payload["diff_id"])
        most["open"] = max(most["open"], len(open_now))

    config = RunConfig(workers=Workers(rollout=4, propose=1, gate=1), gate=GateConfig(screen=False, chunk=4),
                       max_batch=4)
    result = run(tmp_path, bot, run=run_fn, propose=propose, config=config, workers=None, callbacks=[watch],
                 budget=Budget(rollouts=400, proposals=400, gate_evals=120))
    assert result.ok, result.error
    assert result.usage.gate_evals == 120
    bound = 2 * 1 + 1 + 1 + 2 * 4 + 2  # gate channel, evaluating, blocked proposer, candidates, in hand
    assert most["open"] <= bound
    assert result.usage.proposals <= bound + 2 * 1 + 4 + 20  # plus the rollout channel and the proposals decided
    assert result.usage.rollouts < 100


def test_async_runs_stop_with_a_clear_error_when_every_run_call_fails(tmp_path: Path) -> None:
    bot = agent(fail_every=1)
    result = run(tmp_path, bot)
    assert isinstance(result.error, RunFailedError) and "simulated failure" in str(result.error)
    assert bot.runs < 48


def test_async_runs_stop_on_a_reward_outside_0_1_naming_the_task(tmp_path: Path) -> None:
    bot = agent(median=0.001)

    async def reward(task: Task, output: str) -> float:
        return 1.5 if task.id in WORLD.val else bot.reward(task, output)

    result = run(tmp_path, bot, reward=reward)
    assert isinstance(result.error, RewardError)
    assert any(task_id in str(result.error) for task_id in WORLD.val)
    assert [k for k, _ in events(tmp_path, ["failed"])] == ["failed"]


@pytest.mark.parametrize("asynchronous", [False, True])
def test_an_outage_after_a_good_start_stops_the_run_with_a_clear_error(tmp_path: Path, asynchronous: bool) -> None:
    bot = agent()
    calls = {"n": 0}

    async def flaky(rendered: str, task: Task) -> str:
        calls["n"] += 1
        if calls["n"] > 40:
            raise ConnectionError("model server went away")
        return await bot.run(rendered, task)

    result = run(tmp_path, bot, run=flaky, asynchronous=asynchronous,
                 budget=Budget(rollouts=400, proposals=200, gate_evals=4000))
    assert isinstance(result.error, RunFailedError)
    assert "all failed, after" in str(result.error) and "model server went away" in str(result.error)
    assert result.counts["run_errors"] >= 32 and result.usage.rollouts < 400


@pytest.mark.timeout(60)
def test_repair_on_an_l1_artifact_ends_within_its_budget_and_commits_only_fully_checked_changes(
        tmp_path: Path) -> None:
    """REPAIR under the asynchronous runtime on an L1 artifact (every commit needs a full check) was reported to
    hang: a deferred change behind another's full check came back forever. It must end, ok, with its budget."""
    bot = agent(median=0.001)
    staleness = Staleness(async_ratio=10_000, alpha_max=0, policy=StalePolicy.REPAIR, repair=bot.repair)
    result = run(tmp_path, bot, staleness=staleness, budget=Budget(calls=300),
                 artifact=replace(WORLD.artifact, layer=Layer.L1))
    assert result.ok, result.error
    assert result.usage.rollouts + result.usage.gate_evals <= 300
    assert bot.repairs, "no stale diff was handed to repair: the test did not exercise the policy"
    accepted = [d for d in result.decisions if d.outcome is Outcome.ACCEPTED]
    assert accepted, "nothing was learned"
    with SQLiteStore(tmp_path, git=False) as lib:
        assert all(lib.evidence(d.diff_id).full for d in accepted)  # L1: only on a full check
    check_commits(tmp_path)


def test_under_a_call_budget_a_cohort_is_judged_on_one_head_and_taken_in_one_step(tmp_path: Path) -> None:
    """Rollouts go out in cohorts: the candidates of one are evaluated on the same head and reach one aggregator
    step, which fuses the compatible ones into one version (a stream of single candidates would need a version
    each, and a re-check of every later one on the moved head)."""
    steps: list[tuple[int, int]] = []  # (head, candidates) of each step

    def watch(kind: str, payload: Mapping[str, Any]) -> None:
        if kind == "step":
            steps.append((payload["head"], len(payload["candidates"])))

    result = run(tmp_path, agent(), budget=Budget(calls=160), workers=Workers(rollout=4, propose=2, gate=2),
                 asynchronous=True, callbacks=[watch])
    assert result.ok, result.error
    assert result.counts["decision_fused"] >= 2
    assert max(n for _, n in steps) >= 2
    assert result.counts.get("rebased_before_gate", 0) == 0  # no proposal was judged on a head that had moved
