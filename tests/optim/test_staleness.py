"""Tests of the `drop_stale` stage: lag, rebase, recheck, duplicates, and the heat-adaptive tolerated lag."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgrad.core.decision import Decision, Outcome
from agentgrad.core.diff import Diff, apply
from agentgrad.core.evidence import Evidence
from agentgrad.core.ops import Op
from agentgrad.errors import StateDictError, UnknownArtifactError
from agentgrad.optim.base import Batch, Candidate, Context, Head, verdict
from agentgrad.optim.staleness import StalenessState, alpha_for, drop_stale, lag_of, move_to_head

AID = "skills/style"
OTHER = "skills/other"
BASE_TEXT = "- be brief\n- cite sources\n"


def evidence(delta: float = 0.2) -> Evidence:
    return Evidence.paired({"t1": 0.4, "t2": 0.5}, {"t1": 0.4 + delta, "t2": 0.5 + delta})


def candidate(*ops: Op, base: int = 0, breaks: bool = False, artifact: str = AID) -> Candidate:
    return Candidate(Diff(artifact, base, ops, author="w1", breaks_contract=breaks), evidence())


def context(version: int, text: str = BASE_TEXT, now: float = 0.0) -> Context:
    return Context({AID: Head(version, text), OTHER: Head(version, text)}, now=now)


def accepted(artifact: str = AID, n: int = 0) -> Decision:
    return verdict(candidate(Op.add("rule", f"- accepted rule {n}"), artifact=artifact), Outcome.ACCEPTED,
                   "acceptance", "better")


def only_decision(batch: Batch) -> Decision:
    assert len(batch.decisions) == 1
    return batch.decisions[0]


def probe_alpha(stage_state: StalenessState, now: float, **kwargs: float) -> float:
    """The alpha `drop_stale` uses for AID at `now`, read from the numbers of a far-too-stale probe."""
    stage = drop_stale(**kwargs)  # type: ignore[arg-type]
    probe = candidate(Op.add("rule", "- probe"), base=0)
    batch, _ = stage.update(Batch((probe,)), stage_state, context(100, now=now))
    return only_decision(batch).numbers["alpha"]


def test_fresh_diff_that_applies_passes_unchanged() -> None:
    stage = drop_stale()
    c = candidate(Op.add("rule", "- check the units"))
    batch, state = stage.update(Batch((c,)), stage.init(), context(0))
    assert batch.candidates == (c,)
    assert batch.decisions == () and batch.held == ()
    assert state.passed == 1


def test_fresh_diff_that_does_not_apply_is_rejected() -> None:
    stage = drop_stale()
    c = candidate(Op.delete("rule", "- a rule that is not there"))
    batch, state = stage.update(Batch((c,)), stage.init(), context(0))
    decision = only_decision(batch)
    assert decision.outcome is Outcome.REJECTED
    assert "does not apply to head" in decision.reason
    assert decision.numbers["lag"] == 0
    assert batch.candidates == () and state.rejected == 1


def test_stale_diff_within_alpha_is_rebased_and_marked_for_recheck() -> None:
    stage = drop_stale(alpha_max=4)
    head_text = BASE_TEXT + "- use metric units\n"
    c = candidate(Op.add("rule", "- check the units"))
    batch, state = stage.update(Batch((c,)), stage.init(), context(2, head_text))
    assert batch.decisions == ()
    (moved,) = batch.candidates
    assert moved.recheck is True
    assert moved.diff.id == c.diff.id and moved.diff.base_version == 2
    assert moved.evidence == c.evidence
    assert apply(moved.diff, head_text) == head_text + "- check the units\n"
    assert state.rebased == 1


def test_rebased_diff_already_in_head_is_a_duplicate() -> None:
    stage = drop_stale()
    c = candidate(Op.add("rule", "- check the units"))
    batch, state = stage.update(Batch((c,)), stage.init(), context(1, BASE_TEXT + "- check the units\n"))
    decision = only_decision(batch)
    assert decision.outcome is Outcome.DUPLICATE
    assert decision.numbers["lag"] == 1
    assert batch.candidates == () and state.duplicate == 1


def test_rebase_conflict_is_stale_with_the_conflict_reason() -> None:
    stage = drop_stale()
    c = candidate(Op.replace("rule", "- be brief", "- be very brief"))
    batch, state = stage.update(Batch((c,)), stage.init(), context(1, "- be terse\n- cite sources\n"))
    decision = only_decision(batch)
    assert decision.outcome is Outcome.STALE
    assert "be brief" in decision.reason and "deleted meanwhile" in decision.reason
    assert decision.outcome.final and batch.held == ()
    assert state.stale == 1


def test_lag_beyond_alpha_is_stale_with_lag_alpha_and_rate() -> None:
    stage = drop_stale(alpha_max=2)
    c = candidate(Op.add("rule", "- check the units"))
    batch, _ = stage.update(Batch((c,)), stage.init(), context(3))
    decision = only_decision(batch)
    assert decision.outcome is Outcome.STALE
    assert dict(decision.numbers) == {"lag": 3.0, "alpha": 2.0, "rate": 0.0}


def test_contract_breaking_diff_gets_alpha_zero() -> None:
    stage = drop_stale(alpha_max=4, alpha_min=2)
    breaking = candidate(Op.add("rule", "- check the units"), breaks=True)
    batch, _ = stage.update(Batch((breaking,)), stage.init(), context(1))
    decision = only_decision(batch)
    assert decision.outcome is Outcome.STALE and decision.numbers["alpha"] == 0
    fresh, _ = stage.update(Batch((breaking,)), stage.init(), context(0))
    assert fresh.candidates == (breaking,)
    plain = candidate(Op.add("rule", "- check the units"))
    rebased, _ = stage.update(Batch((plain,)), stage.init(), context(1))
    assert rebased.candidates[0].recheck


def test_alpha_shrinks_as_commits_accumulate_and_recovers_as_time_passes() -> None:
    kwargs = {"alpha_max": 4, "half_rate": 0.05, "decay": 60.0}
    stage = drop_stale(**kwargs)  # type: ignore[arg-type]
    state = stage.init()
    alphas = [probe_alpha(state, 0.0, **kwargs)]
    for step in range(12):
        state = stage.observe((accepted(n=step),), state, context(step, now=float(step)))
        alphas.append(probe_alpha(state, float(step), **kwargs))
    assert alphas[0] == 4
    assert all(a >= b for a, b in itertools.pairwise(alphas))
    assert alphas[-1] <= 1
    assert probe_alpha(state, 100.0, **kwargs) > alphas[-1]
    assert probe_alpha(state, 2000.0, **kwargs) == 4


def test_only_accepted_decisions_on_the_same_artifact_heat_it() -> None:
    kwargs = {"alpha_max": 4, "half_rate": 0.01, "decay": 60.0}
    stage = drop_stale(**kwargs)  # type: ignore[arg-type]
    rejected = verdict(candidate(Op.add("rule", "- x")), Outcome.REJECTED, "acceptance", "worse")
    decisions = [accepted(OTHER, n) for n in range(5)] + [rejected]
    state = stage.observe(decisions, stage.init(), context(0))
    assert probe_alpha(state, 0.0, **kwargs) == 4
    assert state.rate_at(OTHER, 0.0, 60.0) == pytest.approx(5 / 60)
    assert state.rate_at(AID, 0.0, 60.0) == 0.0


def test_alpha_is_half_of_alpha_max_at_half_rate_and_never_below_alpha_min() -> None:
    state = StalenessState({AID: (0.5, 10.0)})
    assert probe_alpha(state, 10.0, alpha_max=4, half_rate=0.5) == 2
    assert probe_alpha(state, 10.0, alpha_max=4, alpha_min=3, half_rate=0.5) == 3


@settings(derandomize=True, max_examples=60)
@given(st.floats(0, 1e6), st.floats(0, 1e6), st.integers(0, 10), st.integers(0, 10))
def test_alpha_is_bounded_and_does_not_grow_with_the_rate(r1: float, r2: float, lo: int, extra: int) -> None:
    hi = lo + extra
    a1, a2 = (alpha_for(r, alpha_max=hi, alpha_min=lo, half_rate=1.0) for r in sorted((r1, r2)))
    assert lo <= a2 <= a1 <= hi
    assert alpha_for(0.0, alpha_max=hi, alpha_min=lo, half_rate=1.0) == hi


def test_state_dict_round_trips_and_behaves_the_same_after_reload() -> None:
    stage = drop_stale(half_rate=0.05)
    state = stage.init()
    for step in range(3):
        state = stage.observe((accepted(n=step),), state, context(step, now=float(step)))
    batch_in = Batch((candidate(Op.add("rule", "- a")), candidate(Op.add("rule", "- b"), base=0)))
    _, state = stage.update(batch_in, state, context(0))
    reloaded = stage.load(json.loads(json.dumps(state.to_dict())))
    assert reloaded == state
    probe = Batch((candidate(Op.add("rule", "- c")), candidate(Op.add("rule", "- d"), base=1)))
    ctx = context(2, now=5.0)
    assert stage.update(probe, reloaded, ctx) == stage.update(probe, state, ctx)
    assert stage.observe((accepted(),), reloaded, ctx) == stage.observe((accepted(),), state, ctx)


@pytest.mark.parametrize("bad", [
    {"heat": []},
    {"heat": {AID: [1.0]}},
    {"heat": {AID: [-1.0, 0.0]}},
    {"heat": {AID: ["hot", 0.0]}},
    {"passed": -1},
    {"stale": 1.5},
])
def test_loading_a_malformed_state_dict_raises(bad: dict[str, object]) -> None:
    with pytest.raises(StateDictError):
        StalenessState.load(bad)


def test_same_inputs_give_the_same_outputs() -> None:
    stage = drop_stale()
    batch_in = Batch((candidate(Op.add("rule", "- a")), candidate(Op.delete("rule", "- gone")),
                      candidate(Op.add("rule", "- b"), base=1)))
    ctx = context(2, now=3.0)
    assert stage.update(batch_in, stage.init(), ctx) == stage.update(batch_in, stage.init(), ctx)


def test_unknown_artifact_raises_a_typed_error() -> None:
    stage = drop_stale()
    with pytest.raises(UnknownArtifactError, match="skills/nowhere"):
        stage.update(Batch((candidate(Op.add("rule", "- a"), artifact="skills/nowhere"),)), stage.init(),
                     context(0))


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="alpha_min"):
        drop_stale(alpha_max=1, alpha_min=2)
    with pytest.raises(ValueError, match="decay"):
        drop_stale(decay=0.0)


def test_the_one_staleness_rule_moves_refuses_or_finds_the_effect_already_there() -> None:
    base = "# S\n- a: use method 1\n"
    head = apply(Diff("s", 0, (Op.add("rule", "- b: use method 2"),)), base)
    fresh = Diff("s", 1, (Op.add("rule", "- c: use method 3"),))
    behind = Diff("s", 0, (Op.add("rule", "- c: use method 3"),))
    assert move_to_head(fresh, head, 1, alpha=0) is fresh
    moved = move_to_head(behind, head, 1, alpha=1)
    assert isinstance(moved, Diff) and moved.base_version == 1 and "- c: use method 3" in apply(moved, head)
    assert move_to_head(behind, head, 1, alpha=0) == (Outcome.STALE, "lag 1 exceeds the tolerated lag 0 of 's'")
    assert isinstance(move_to_head(behind, head, 1, alpha=None), Diff)  # KEEP: any lag
    breaking = Diff("s", 0, behind.ops, breaks_contract=True)
    assert move_to_head(breaking, head, 1, alpha=None)[0] is Outcome.STALE  # type: ignore[index]
    again = Diff("s", 0, (Op.add("rule", "- b: use method 2"),))
    assert move_to_head(again, head, 1, alpha=4)[0] is Outcome.DUPLICATE  # type: ignore[index]


def test_in_a_library_heat_is_kept_per_member() -> None:
    text = 'agentgrad-library/1\n{"system": "", "tips": ""}'
    ctx = Context({"library": Head(0, text), "tips": Head(0, ""), "system": Head(0, "")}, now=10.0)
    cand = Candidate(Diff("library", 0, (Op.add("rule", "- a").within("tips"),)),
                     Evidence.paired({"t": 0.0}, {"t": 1.0}))
    stage = drop_stale()
    _, state = stage.update(Batch((cand,)), stage.init(), ctx)
    assert state.routes == {cand.diff.id: ("tips",)}
    accepted = Decision(cand.diff.id, "library", Outcome.ACCEPTED, "acceptance", "helps")
    state = stage.observe([accepted], state, ctx)
    assert state.rate_at("tips", 10.0, 60.0) > 0 and state.rate_at("system", 10.0, 60.0) == 0
    assert state.routes == {}


def _library_head(version: int, changes: dict[int, frozenset[str]]) -> Head:
    return Head(version, 'agentgrad-library/1\n{"system": "Be kind.", "tips": ""}', changes=changes)


def test_in_a_library_only_versions_that_changed_a_member_the_diff_edits_count_as_lag() -> None:
    tips = Diff("library", 1, (Op.add("rule", "- a").within("tips"),))
    changes = {2: frozenset({"system"}), 3: frozenset({"system"}), 4: frozenset({"tips", "system"})}
    assert lag_of(tips, _library_head(4, changes)) == 1
    assert lag_of(tips, _library_head(3, changes)) == 0
    assert lag_of(tips, _library_head(4, {3: changes[3], 4: changes[4]})) == 3  # version 2 unknown: all count
    plain = Diff("library", 1, (Op.add("rule", "- a"),))
    assert lag_of(plain, _library_head(4, changes)) == 3  # an op of no member: every version counts
    stage = drop_stale(alpha_max=0)
    cand = Candidate(tips, evidence())
    ctx = Context({"library": _library_head(3, changes)})
    batch, state = stage.update(Batch((cand,)), stage.init(), ctx)
    assert not batch.decisions and batch.candidates[0].diff.base_version == 3 and state.rebased == 1
    batch, _ = stage.update(Batch((cand,)), stage.init(), Context({"library": _library_head(4, changes)}))
    assert only_decision(batch).outcome is Outcome.STALE and only_decision(batch).numbers["lag"] == 1.0
