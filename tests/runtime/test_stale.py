"""Stale diffs: rebase before the gate, and the keep / discard / repair policies on single diffs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio

from agentgrad.core.decision import Decision, Outcome
from agentgrad.core.diff import Diff, fingerprint
from agentgrad.core.evidence import Evidence
from agentgrad.optim.aggregator import StepResult
from agentgrad.optim.base import Candidate
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.config import RunConfig, Staleness, StalePolicy
from agentgrad.runtime.engine import Engine
from agentgrad.runtime.records import Proposed, Rollout, Snapshot
from agentgrad.runtime.stale import REPAIR_SUFFIX, can_repair, follow_ups, reanchor, recheck
from agentgrad.runtime.stale import touched as stale_touched
from agentgrad.strategies.base import make_diff
from tests.runtime.helpers import WORLD, agent, build_engine, events

T = TypeVar("T")


def _diff(text: str, version: int, proposal: str, diff_id: str) -> Diff:
    made = make_diff(WORLD.strategy, WORLD.artifact.id, version, text, proposal, author="w0")
    return Diff(made.artifact_id, made.base_version, made.ops, made.author, id=diff_id)


def _commit(engine: Engine, proposal: str, diff_id: str) -> None:
    """Move the head one version on, as a step would."""
    diff = _diff(engine.head.text, engine.head.version, proposal, diff_id)
    decision = Decision(diff.id, diff.artifact_id, Outcome.ACCEPTED, "accept", "test", {}, fingerprint(diff))
    version = engine.store.commit(diff, Evidence(()), decision)
    engine.head = Snapshot(version.number, version.text)


def _with_lag(store: Path, policy: StalePolicy, fn: Callable[[Engine, Proposed], Awaitable[T]], *, alpha: int = 0,
              lag: int = 2, repair: Callable[..., Any] | None = None) -> T:
    """Call `fn(engine, proposed)` in an event loop, with the head `lag` versions past the proposal's base."""
    bot = agent()
    if policy is StalePolicy.REPAIR and repair is None:
        repair = bot.repair
    config = RunConfig(staleness=Staleness(alpha_max=alpha, policy=policy, repair=repair))

    async def main() -> T:
        engine = build_engine(store, bot, config=config)
        try:
            base = engine.head
            proposed = Proposed(_diff(base.text, base.version, "dates: use method 2", "p000001"), base, None)
            for i in range(lag):
                _commit(engine, f"tip {i}: be concise", f"c{i}")
            return await fn(engine, proposed)
        finally:
            engine.journal.events.close()
            engine.store.close()

    return anyio.run(main)


def test_a_diff_within_the_tolerated_lag_is_rebased_onto_the_head(tmp_path: Path) -> None:
    async def check(engine: Engine, proposed: Proposed) -> None:
        moved = reanchor(engine, proposed)
        assert isinstance(moved, Proposed)
        assert moved.diff.base_version == engine.head.version == 2 and moved.diff.id == "p000001"
        assert engine.journal.counts["rebased_before_gate"] == 1

    _with_lag(tmp_path, StalePolicy.DISCARD, check, alpha=2)


def test_discard_records_a_diff_beyond_the_lag_as_stale(tmp_path: Path) -> None:
    async def check(engine: Engine, proposed: Proposed) -> None:
        decision = reanchor(engine, proposed)
        assert isinstance(decision, Decision) and decision.outcome is Outcome.STALE
        assert "lag 2 exceeds the tolerated lag 1" in decision.reason
        assert engine.store.decisions(diff_id="p000001")[-1] == decision

    _with_lag(tmp_path, StalePolicy.DISCARD, check, alpha=1)
    assert [p["outcome"] for _, p in events(tmp_path, ["decision"])] == ["stale"]


def test_keep_rebases_whatever_the_lag(tmp_path: Path) -> None:
    async def check(engine: Engine, proposed: Proposed) -> None:
        moved = reanchor(engine, proposed)
        assert isinstance(moved, Proposed) and moved.diff.base_version == 3

    _with_lag(tmp_path, StalePolicy.KEEP, check, lag=3)


def test_a_diff_the_head_already_has_is_a_duplicate(tmp_path: Path) -> None:
    async def check(engine: Engine, proposed: Proposed) -> None:
        _commit(engine, "dates: use method 2", "same")
        decision = reanchor(engine, proposed)
        assert isinstance(decision, Decision) and decision.outcome is Outcome.DUPLICATE

    _with_lag(tmp_path, StalePolicy.DISCARD, check, alpha=4, lag=1)


def test_repair_is_called_with_the_head_and_its_diff_goes_through_the_gate(tmp_path: Path) -> None:
    calls: list[tuple[str, str]] = []

    async def repair(diff: dict[str, Any], head_text: str) -> str:
        calls.append((diff["id"], head_text))
        return "dates: use method 2"

    async def check(engine: Engine, proposed: Proposed) -> None:
        candidate = await recheck(engine, Candidate(proposed.diff, Evidence(())), Outcome.STALE)
        assert calls == [("p000001", engine.head.text)]
        assert candidate is not None and candidate.diff.id == "p000001" + REPAIR_SUFFIX
        assert candidate.diff.base_version == 2 and len(candidate.evidence.rows) > 0
        assert engine.accounts.meter.used["proposals"] == 1  # a repair is budgeted like a proposal

    _with_lag(tmp_path, StalePolicy.REPAIR, check, repair=repair)
    assert [p for _, p in events(tmp_path, ["repair"])] == [
        {"diff": "p000001", "repaired": "p000001-repair", "head": 2, "error": None}]
    assert [p["repair_of"] for _, p in events(tmp_path, ["proposal"])] == ["p000001"]


def test_a_repair_that_gives_garbage_is_recorded_and_dropped(tmp_path: Path) -> None:
    async def garbage(diff: dict[str, Any], head_text: str) -> str:
        return "\ud800"

    async def check(engine: Engine, proposed: Proposed) -> None:
        assert await recheck(engine, Candidate(proposed.diff, Evidence(())), Outcome.STALE) is None
        assert engine.journal.counts["invalid_proposals"] == 1 and engine.accounts.meter.used["proposals"] == 1

    _with_lag(tmp_path, StalePolicy.REPAIR, check, repair=garbage)
    assert [p["repaired"] for _, p in events(tmp_path, ["repair"])] == [None]


def test_a_repaired_diff_is_never_repaired_again(tmp_path: Path) -> None:
    async def check(engine: Engine, proposed: Proposed) -> None:
        assert can_repair(engine, proposed.diff)
        assert not can_repair(engine, Diff(proposed.diff.artifact_id, 0, proposed.diff.ops, id="p1" + REPAIR_SUFFIX))

    _with_lag(tmp_path, StalePolicy.REPAIR, check)


def test_only_the_repair_policy_sends_stale_step_verdicts_back(tmp_path: Path) -> None:
    async def check(engine: Engine, proposed: Proposed) -> list[Outcome]:
        stale = Decision("p000001", WORLD.artifact.id, Outcome.STALE, "staleness", "lag", {}, "")
        work = follow_ups(engine, StepResult((), (stale,), ()), [Candidate(proposed.diff, Evidence(()))])
        return [o for _, o in work]

    for policy in StalePolicy:
        sent_back = _with_lag(tmp_path / policy.value, policy, check)
        assert sent_back == ([Outcome.STALE] if policy is StalePolicy.REPAIR else [])


def _commit_with(engine: Engine, proposal: str, diff_id: str, evidence: Evidence) -> None:
    diff = _diff(engine.head.text, engine.head.version, proposal, diff_id)
    decision = Decision(diff.id, diff.artifact_id, Outcome.ACCEPTED, "accept", "test", {}, fingerprint(diff))
    version = engine.store.commit(diff, evidence, decision)
    engine.head = Snapshot(version.number, version.text)


def test_a_held_candidate_is_rechecked_on_the_head_scoring_only_its_effect_and_what_the_commit_changed(
        tmp_path: Path) -> None:
    bot = agent()

    async def main() -> tuple[frozenset[str] | None, Candidate | None, int, int]:
        engine = build_engine(tmp_path, bot)
        try:
            base = engine.head
            val = engine.val
            diff = _diff(base.text, base.version, "dates: use method 2", "p000001")
            old = Evidence.paired(dict.fromkeys(val, 0.0), {t: float(t in val[:3]) for t in val}, base_version=0)
            _commit_with(engine, "tip: be concise", "c0",
                         Evidence.paired(dict.fromkeys(val[:6], 0.0), {t: float(t == val[5]) for t in val[:6]}))
            touched = stale_touched(engine, WORLD.artifact.id, 0, 1)
            held = Candidate(diff, old, recheck=True)
            candidate = await recheck(engine, held, Outcome.RECHECK)
            return touched, candidate, engine.journal.counts["reverified"], engine.cache.misses
        finally:
            engine.journal.events.close()
            engine.store.close()

    touched, candidate, reverified, calls = anyio.run(main)
    assert touched == frozenset({agent().splits().val[5].id})
    assert candidate is not None and reverified == 1
    assert candidate.evidence.base_version == 1 and not candidate.recheck
    assert calls <= 2 * 4  # the 3 tasks of its effect and the 1 task the commit changed, on head and candidate


def test_a_commit_without_evidence_makes_the_recheck_a_full_evaluation(tmp_path: Path) -> None:
    bot = agent()

    async def main() -> tuple[frozenset[str] | None, int]:
        engine = build_engine(tmp_path, bot)
        try:
            base = engine.head
            diff = _diff(base.text, base.version, "dates: use method 2", "p000001")
            old = Evidence.paired({engine.val[0]: 0.0}, {engine.val[0]: 1.0}, base_version=0)
            _commit(engine, "tip: be concise", "c0")  # no evidence, like a revert
            touched = stale_touched(engine, WORLD.artifact.id, 0, 1)
            await recheck(engine, Candidate(diff, old, recheck=True), Outcome.RECHECK)
            return touched, engine.journal.counts["reverified"]
        finally:
            engine.journal.events.close()
            engine.store.close()

    assert anyio.run(main) == (None, 0)


def test_a_deferred_candidate_is_left_open_when_no_gate_call_can_be_paid(tmp_path: Path) -> None:
    # An L1 change deferred behind another's full check used to come back at once, forever, once the budget could
    # pay no more gate calls: the run spun without spending anything. Now it stays open and the loop can end.
    async def main() -> None:
        engine = build_engine(tmp_path, agent(), budget=Budget(calls=1))
        try:
            base = engine.head
            diff = _diff(base.text, base.version, "dates: use method 2", "p000001")
            engine.hold_open([diff])
            engine.accounts.meter.reserve(engine.accounts.meter.per_call("gate_evals"))  # the last call is spent
            assert await recheck(engine, Candidate(diff, Evidence(())), Outcome.DEFERRED) is None
            assert diff.id in {d.id for d in engine.open}
        finally:
            engine.journal.events.close()
            engine.store.close()

    anyio.run(main)


def test_a_proposal_rebased_onto_a_head_that_solves_its_origin_task_is_screened_out_there(tmp_path: Path) -> None:
    """The screen of a rebased proposal compares it with the head it now sits on, not with the rollout's older
    text: a commit since that solved the origin task is no win of the proposal's."""
    async def check(engine: Engine, proposed: Proposed) -> None:
        task = engine.train[0]
        origin = Rollout("w0", task, proposed.snapshot, "wrong", 0.0, None)  # failed on the proposal's base
        moved = reanchor(engine, Proposed(proposed.diff, proposed.snapshot, origin))
        assert isinstance(moved, Proposed) and moved.snapshot == engine.head != origin.snapshot
        engine.cache.put(engine.head.text, task, 1.0)  # the head solves it now
        assert await engine.evaluate(moved) is None
        assert engine.journal.counts["screened_out"] == 1 and not engine.journal.counts["gated"]

    _with_lag(tmp_path, StalePolicy.KEEP, check, lag=1)
