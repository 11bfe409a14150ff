"""Tests of the `govern` stage: L0 frozen, L1 serialized through observe, L2 free."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from agentgrad.core.artifact import Layer
from agentgrad.core.decision import Decision, Outcome
from agentgrad.core.diff import Diff
from agentgrad.core.evidence import Evidence
from agentgrad.core.ops import Op
from agentgrad.errors import StateDictError, UnknownArtifactError
from agentgrad.optim.base import Batch, Candidate, Context, Head, verdict
from agentgrad.optim.governance import GovernanceState, govern

SAFETY = "safety/policy"
HARNESS = "harness/main"
VERIFIER = "verifiers/math"
SKILL = "skills/style"
CTX = Context({SAFETY: Head(0, "", Layer.L0), HARNESS: Head(0, "", Layer.L1), VERIFIER: Head(0, "", Layer.L1),
               SKILL: Head(0, "", Layer.L2)})


def cand(artifact: str, rule: str, delta: float = 0.1, full: bool = False) -> Candidate:
    ev = Evidence.paired({"t1": 0.4, "t2": 0.4}, {"t1": 0.4 + delta, "t2": 0.4 + delta}, full=full)
    return Candidate(Diff(artifact, 0, (Op.add("rule", f"- {rule}"),), author="w"), ev)


def decide(c: Candidate, outcome: Outcome) -> Decision:
    return verdict(c, outcome, "acceptance", outcome.value)


def outcomes(batch: Batch) -> dict[str, Outcome]:
    return {d.diff_id: d.outcome for d in batch.decisions}


def step(candidates: Sequence[Candidate], state: GovernanceState) -> tuple[Batch, GovernanceState]:
    return govern().update(Batch(tuple(candidates)), state, CTX)


def test_any_diff_touching_l0_is_refused() -> None:
    c = cand(SAFETY, "allow shell access", delta=0.5)
    batch, state = step([c], GovernanceState())
    (decision,) = batch.decisions
    assert decision.outcome is Outcome.REFUSED and decision.stage == "governance"
    assert "L0 is frozen" in decision.reason
    assert batch.candidates == () and batch.held == ()
    assert state.refused == 1


def test_l2_diffs_pass_freely() -> None:
    many = [cand(SKILL, f"rule {i}", delta=0.1 * i) for i in range(4)]
    batch, state = step(many, GovernanceState())
    assert batch.candidates == tuple(many)
    assert batch.decisions == ()
    assert state == GovernanceState()


def test_only_the_best_l1_candidate_per_artifact_passes_in_a_batch() -> None:
    weak, best, mid = cand(HARNESS, "a", 0.1), cand(HARNESS, "b", 0.3), cand(HARNESS, "c", 0.2)
    other = cand(VERIFIER, "d", 0.0)
    batch, state = step([weak, best, other, mid], GovernanceState())
    assert batch.candidates == (best, other)
    assert outcomes(batch) == {weak.diff.id: Outcome.DEFERRED, mid.diff.id: Outcome.DEFERRED}
    assert {c.diff.id for c in batch.held} == {weak.diff.id, mid.diff.id}
    assert all(best.diff.id in d.reason for d in batch.decisions)
    assert state.deferred == 2


def test_l1_ties_go_to_the_smaller_id() -> None:
    x, y = cand(HARNESS, "x", 0.2), cand(HARNESS, "y", 0.2)
    smaller = min(x, y, key=lambda c: c.diff.id)
    assert step([y, x], GovernanceState())[0].candidates == (smaller,)
    assert step([x, y], GovernanceState())[0].candidates == (smaller,)


def test_l1_is_serialized_across_steps_through_observe() -> None:
    stage = govern()
    first, second, third = cand(HARNESS, "a", 0.3), cand(HARNESS, "b", 0.1), cand(HARNESS, "c", 0.5)
    batch, state = stage.update(Batch((first, second)), stage.init(), CTX)
    assert batch.candidates == (first,)
    state = stage.observe((*batch.decisions, decide(first, Outcome.FULL_CHECK)), state, CTX)
    assert dict(state.pending) == {HARNESS: first.diff.id}

    back = cand(HARNESS, "a", 0.3, full=True)
    assert back.diff.id == first.diff.id
    batch, state = stage.update(Batch((second, third, back)), state, CTX)
    assert batch.candidates == (back,)
    assert outcomes(batch) == {second.diff.id: Outcome.DEFERRED, third.diff.id: Outcome.DEFERRED}
    assert all(first.diff.id in d.reason for d in batch.decisions)

    state = stage.observe((*batch.decisions, decide(back, Outcome.ACCEPTED)), state, CTX)
    assert dict(state.pending) == {}
    batch, state = stage.update(Batch((second, third)), state, CTX)
    assert batch.candidates == (third,)


def test_while_the_slot_is_taken_nothing_else_passes_even_without_the_pending_diff() -> None:
    state = GovernanceState({HARNESS: "dpending"})
    other = cand(HARNESS, "x", 0.5)
    free = cand(VERIFIER, "y", 0.1)
    batch, _ = step([other, free], state)
    assert batch.candidates == (free,)
    assert outcomes(batch) == {other.diff.id: Outcome.DEFERRED}


def test_the_slot_is_freed_only_by_a_final_outcome_of_the_pending_diff() -> None:
    stage = govern()
    pending, other = cand(HARNESS, "a"), cand(HARNESS, "b")
    state = stage.observe([decide(pending, Outcome.FULL_CHECK)], stage.init(), CTX)
    for decision in (decide(other, Outcome.REJECTED), decide(other, Outcome.FULL_CHECK),
                     decide(pending, Outcome.DEFERRED), decide(pending, Outcome.FULL_CHECK)):
        state = stage.observe([decision], state, CTX)
        assert dict(state.pending) == {HARNESS: pending.diff.id}
    state = stage.observe([decide(pending, Outcome.DROPPED)], state, CTX)
    assert dict(state.pending) == {}


def test_full_check_of_an_l2_diff_takes_no_slot() -> None:
    stage = govern()
    state = stage.observe([decide(cand(SKILL, "a"), Outcome.FULL_CHECK)], stage.init(), CTX)
    assert dict(state.pending) == {}


def test_state_dict_round_trips_and_behaves_the_same_after_reload() -> None:
    stage = govern()
    first = cand(HARNESS, "a")
    batch, state = stage.update(Batch((first, cand(HARNESS, "b", 0.0), cand(SAFETY, "c"))), stage.init(), CTX)
    state = stage.observe((*batch.decisions, decide(first, Outcome.FULL_CHECK)), state, CTX)
    reloaded = stage.load(json.loads(json.dumps(state.to_dict())))
    assert reloaded == state
    assert (reloaded.refused, reloaded.deferred, dict(reloaded.pending)) == (1, 1, {HARNESS: first.diff.id})
    probe = Batch((cand(HARNESS, "z", 0.5), first, cand(SKILL, "s")))
    assert stage.update(probe, reloaded, CTX) == stage.update(probe, state, CTX)


@pytest.mark.parametrize("bad", [{"pending": []}, {"pending": {HARNESS: 3}}, {"refused": -1}, {"deferred": "2"}])
def test_loading_a_malformed_state_dict_raises(bad: dict[str, object]) -> None:
    with pytest.raises(StateDictError):
        GovernanceState.load(bad)


def test_same_inputs_give_the_same_outputs() -> None:
    batch_in = [cand(HARNESS, "a", 0.2), cand(HARNESS, "b", 0.2), cand(SAFETY, "c"), cand(SKILL, "d")]
    assert step(batch_in, GovernanceState()) == step(batch_in, GovernanceState())


def test_unknown_artifact_raises_a_typed_error() -> None:
    with pytest.raises(UnknownArtifactError, match="skills/nowhere"):
        step([cand("skills/nowhere", "a")], GovernanceState())


LIB_CTX = Context({"library": Head(0, "", Layer.L2), "policy": Head(0, "", Layer.L0),
                   "checker": Head(0, "", Layer.L1), "tips": Head(0, "", Layer.L2)})


def lib_cand(rule: str, *members: str, delta: float = 0.1) -> Candidate:
    ev = Evidence.paired({"t1": 0.4, "t2": 0.4}, {"t1": 0.4 + delta, "t2": 0.4 + delta})
    ops = tuple(Op.add("rule", f"- {rule}").within(m) for m in members)
    return Candidate(Diff("library", 0, ops, author="w"), ev)


def test_a_library_diff_takes_the_strictest_layer_of_the_members_it_edits() -> None:
    refused = lib_cand("lie", "tips", "policy")
    first, second = lib_cand("a", "checker", "tips", delta=0.2), lib_cand("b", "checker")
    free = lib_cand("c", "tips")
    batch, state = govern().update(Batch((refused, first, second, free)), GovernanceState(), LIB_CTX)
    seen = outcomes(batch)
    assert seen[refused.diff.id] is Outcome.REFUSED
    assert seen[second.diff.id] is Outcome.DEFERRED  # one L1 change of "checker" at a time
    assert {c.diff.id for c in batch.candidates} == {first.diff.id, free.diff.id}
    assert state.routes == {first.diff.id: "checker"}


def test_a_library_diff_out_for_a_full_check_holds_its_l1_member_until_decided() -> None:
    first, second = lib_cand("a", "checker"), lib_cand("b", "checker")
    stage = govern()
    _, state = stage.update(Batch((first,)), GovernanceState(), LIB_CTX)
    state = stage.observe([decide(first, Outcome.FULL_CHECK)], state, LIB_CTX)
    assert state.pending == {"checker": first.diff.id}
    batch, state = stage.update(Batch((second,)), state, LIB_CTX)
    assert outcomes(batch)[second.diff.id] is Outcome.DEFERRED
    state = stage.observe([decide(first, Outcome.ACCEPTED)], state, LIB_CTX)
    assert state.pending == {} and state.routes == {}
    assert GovernanceState.load(json.loads(json.dumps(state.to_dict()))) == state
