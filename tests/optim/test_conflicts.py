"""Tests of the `resolve_conflicts` stage: same-unit and semantic clashes, duplicates, shared-example comparison."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgrad.core.decision import Decision, Outcome
from agentgrad.core.diff import Diff
from agentgrad.core.evidence import Evidence
from agentgrad.core.ops import Op
from agentgrad.core.units import normalise
from agentgrad.optim.base import Batch, Candidate, Context, Head
from agentgrad.optim.conflicts import clash, resolve_conflicts

AID = "skills/style"
OTHER = "skills/other"
CTX = Context({AID: Head(0, ""), OTHER: Head(0, "")})


def cand(*ops: Op, deltas: Mapping[str, float], artifact: str = AID, author: str = "w1",
         recheck: bool = False) -> Candidate:
    ev = Evidence.paired({t: 0.5 for t in deltas}, {t: 0.5 + d for t, d in deltas.items()})
    return Candidate(Diff(artifact, 0, ops, author=author), ev, recheck=recheck)


def run(candidates: Sequence[Candidate], **kwargs: object) -> Batch:
    stage = resolve_conflicts(**kwargs)  # type: ignore[arg-type]
    batch, _ = stage.update(Batch(tuple(candidates)), stage.init(), CTX)
    return batch


def outcomes(batch: Batch) -> dict[str, Outcome]:
    return {d.diff_id: d.outcome for d in batch.decisions}


def decision_of(batch: Batch, c: Candidate) -> Decision:
    (decision,) = [d for d in batch.decisions if d.diff_id == c.diff.id]
    return decision


def negates(a: Op, b: Op) -> bool:
    """'always X' contradicts 'never X' (a strategy's semantic check, for the tests)."""
    body_a, body_b = normalise(a.new or ""), normalise(b.new or "")
    return body_a.startswith("- always ") and body_b == body_a.replace("- always ", "- never ", 1)


def test_two_values_for_one_key_conflict_and_the_better_one_wins() -> None:
    worse = cand(Op.add("key", "alpha: method 1"), deltas={"t1": 0.1, "t2": 0.1})
    better = cand(Op.add("key", "alpha: method 2"), deltas={"t1": 0.3, "t2": 0.3})
    batch = run([worse, better])
    assert [c.diff.id for c in batch.candidates] == [better.diff.id]
    decision = decision_of(batch, worse)
    assert decision.outcome is Outcome.CONFLICT and decision.stage == "conflicts"
    assert better.diff.id in decision.reason
    assert decision.numbers["mean_delta"] == pytest.approx(0.1)
    assert decision.numbers["winner_mean_delta"] == pytest.approx(0.3)
    assert decision.numbers["shared"] == 2


def test_add_and_delete_of_one_rule_conflict() -> None:
    add = cand(Op.add("rule", "- cite sources"), deltas={"t1": 0.2})
    delete = cand(Op.delete("rule", "- Cite sources."), deltas={"t1": 0.1})
    batch = run([delete, add])
    assert outcomes(batch) == {delete.diff.id: Outcome.CONFLICT}
    assert batch.candidates == (add,)


def test_negated_rules_conflict_only_with_a_contradicts_function() -> None:
    always = cand(Op.add("rule", "- always cite sources"), deltas={"t1": 0.1, "t2": 0.0})
    never = cand(Op.add("rule", "- never cite sources"), deltas={"t1": 0.2, "t2": 0.2})
    assert outcomes(run([always, never])) == {}
    batch = run([always, never], contradicts=negates)
    decision = decision_of(batch, always)
    assert decision.outcome is Outcome.CONFLICT and "contradicts" in decision.reason
    assert batch.candidates == (never,)


def test_contradicts_is_asked_both_ways_round() -> None:
    always = cand(Op.add("rule", "- always cite sources"), deltas={"t1": 0.3})
    never = cand(Op.add("rule", "- never cite sources"), deltas={"t1": 0.1})
    assert clash(always, never, negates) is not None
    assert clash(never, always, negates) is not None
    assert outcomes(run([never, always], contradicts=negates)) == {never.diff.id: Outcome.CONFLICT}


def test_winner_is_chosen_on_shared_examples() -> None:
    broad = cand(Op.add("key", "tone: formal"), deltas={"t1": 0.0, "t2": 0.0, "t3": 0.5, "t4": 0.5})
    narrow = cand(Op.add("key", "tone: friendly"), deltas={"t1": 0.2, "t2": 0.2, "t5": -0.2})
    assert broad.evidence.mean_delta() > narrow.evidence.mean_delta()
    batch = run([broad, narrow])
    assert batch.candidates == (narrow,)
    decision = decision_of(batch, broad)
    assert narrow.diff.id in decision.reason
    assert decision.numbers["mean_delta"] == pytest.approx(0.0)
    assert decision.numbers["winner_mean_delta"] == pytest.approx(0.2)
    assert decision.numbers["shared"] == 2 and decision.numbers["on_shared"] == 1


def test_too_few_shared_examples_fall_back_to_own_means() -> None:
    broad = cand(Op.add("key", "tone: formal"), deltas={"t1": 0.0, "t2": 0.0, "t3": 0.5, "t4": 0.5})
    narrow = cand(Op.add("key", "tone: friendly"), deltas={"t1": 0.2, "t2": 0.2, "t5": -0.2})
    batch = run([broad, narrow], min_shared=3)
    assert batch.candidates == (broad,)
    decision = decision_of(batch, narrow)
    assert decision.numbers["on_shared"] == 0 and decision.numbers["shared"] == 2
    assert decision.numbers["winner_mean_delta"] == pytest.approx(0.25)


def test_ties_go_to_more_rows_then_to_the_smaller_id() -> None:
    more_rows = cand(Op.add("key", "alpha: one"), deltas={"t1": 0.1, "t2": 0.1, "t3": 0.1})
    fewer_rows = cand(Op.add("key", "alpha: two"), deltas={"t1": 0.1, "t2": 0.1})
    assert run([fewer_rows, more_rows]).candidates == (more_rows,)
    x = cand(Op.add("key", "beta: one"), deltas={"t1": 0.1})
    y = cand(Op.add("key", "beta: two"), deltas={"t1": 0.1})
    smaller, larger = sorted((x, y), key=lambda c: c.diff.id)
    assert run([larger, smaller]).candidates == (smaller,)


def test_same_change_in_other_words_is_a_duplicate_of_the_better_one() -> None:
    first = cand(Op.add("rule", "- Cite sources"), deltas={"t1": 0.1}, author="w1")
    second = cand(Op.add("rule", "-  cite SOURCES."), deltas={"t1": 0.3}, author="w2")
    batch = run([first, second])
    decision = decision_of(batch, first)
    assert decision.outcome is Outcome.DUPLICATE and second.diff.id in decision.reason
    assert batch.candidates == (second,)


def test_diffs_of_different_artifacts_or_units_do_not_conflict() -> None:
    a = cand(Op.add("key", "alpha: method 1"), deltas={"t1": 0.1})
    b = cand(Op.add("key", "alpha: method 2"), deltas={"t1": 0.3}, artifact=OTHER)
    c = cand(Op.add("key", "beta: method 2"), deltas={"t1": 0.3})
    batch = run([a, b, c])
    assert batch.decisions == ()
    assert batch.candidates == (a, b, c)


def test_rechecked_candidates_take_part() -> None:
    rebased = cand(Op.add("key", "alpha: method 1"), deltas={"t1": 0.4}, recheck=True)
    fresh = cand(Op.add("key", "alpha: method 2"), deltas={"t1": 0.1})
    batch = run([fresh, rebased])
    assert batch.candidates == (rebased,)
    assert outcomes(batch) == {fresh.diff.id: Outcome.CONFLICT}


POOL = (
    cand(Op.add("key", "alpha: 1"), deltas={"t1": 0.1, "t2": 0.3}, author="a"),
    cand(Op.add("key", "alpha: 2"), deltas={"t1": 0.2, "t3": 0.0}, author="b"),
    cand(Op.add("key", "alpha: 2"), deltas={"t2": 0.2}, author="c"),
    cand(Op.add("key", "beta: 1"), Op.add("key", "alpha: 3"), deltas={"t1": 0.2, "t2": 0.1}, author="d"),
    cand(Op.add("rule", "- always cite"), deltas={"t4": 0.1}, author="e"),
    cand(Op.add("rule", "- never cite"), deltas={"t4": 0.1}, author="f"),
    cand(Op.add("key", "alpha: 1"), deltas={"t1": 0.3}, artifact=OTHER, author="g"),
    cand(Op.add("key", "beta: 2"), deltas={"t1": 0.2, "t2": 0.1}, author="h"),
)


@settings(derandomize=True, max_examples=40)
@given(st.permutations(POOL))
def test_result_does_not_depend_on_the_order_of_the_batch(order: list[Candidate]) -> None:
    reference = run(POOL, contradicts=negates)
    batch = run(order, contradicts=negates)
    assert batch.decisions == reference.decisions
    assert {c.diff.id for c in batch.candidates} == {c.diff.id for c in reference.candidates}
    assert [c.diff.id for c in batch.candidates] == [c.diff.id for c in order if c in batch.candidates]


KEYS = ("k1", "k2", "k3")
TASKS = ("t1", "t2", "t3", "t4")


@st.composite
def candidates(draw: st.DrawFn) -> list[Candidate]:
    out = []
    for index in range(draw(st.integers(1, 6))):
        keys = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=2, unique=True))
        ops = tuple(Op.add("key", f"{k}: {draw(st.sampled_from('xy'))}") for k in keys)
        tasks = draw(st.lists(st.sampled_from(TASKS), min_size=1, unique=True))
        deltas = {t: draw(st.sampled_from((-0.2, 0.0, 0.1, 0.3))) for t in tasks}
        out.append(cand(*ops, deltas=deltas, author=f"w{index}"))
    return out


@settings(derandomize=True, max_examples=60)
@given(candidates(), st.randoms(use_true_random=False))
def test_survivors_never_clash_and_every_loser_has_a_verdict(pool: list[Candidate], rng: random.Random) -> None:
    batch = run(pool)
    survivors = batch.candidates
    for i, a in enumerate(survivors):
        for b in survivors[i + 1:]:
            assert clash(a, b, None) is None
    decided = {d.diff_id for d in batch.decisions}
    assert decided | {c.diff.id for c in survivors} == {c.diff.id for c in pool}
    assert not decided & {c.diff.id for c in survivors}
    assert {d.outcome for d in batch.decisions} <= {Outcome.CONFLICT, Outcome.DUPLICATE}
    shuffled = list(pool)
    rng.shuffle(shuffled)
    assert run(shuffled).decisions == batch.decisions


def test_min_shared_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="min_shared"):
        resolve_conflicts(min_shared=0)
