"""`accept_if`: ties are never accepted, clear gains are, and passers that cannot land yet are held."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgrad.core.artifact import Layer
from agentgrad.core.decision import Outcome
from agentgrad.core.diff import Diff
from agentgrad.core.evidence import Evidence, Row
from agentgrad.core.ops import Op
from agentgrad.errors import ConfigError, StateDictError, UnknownArtifactError
from agentgrad.optim.acceptance import AcceptanceState, accept_if
from agentgrad.optim.base import Batch, Candidate, Context, Head
from agentgrad.optim.noise import NoiseEstimate
from agentgrad.optim.schedules import linear
from agentgrad.optim.stats import prob_improvement

ARTIFACT = "skills/s"
TEXT = "intro: hello\n"


def diff(key: str = "alpha", artifact: str = ARTIFACT, base: int = 0) -> Diff:
    return Diff(artifact, base, (Op.add("key", f"{key}: use method 3"),))


def evidence(pairs: Sequence[tuple[float, float]], *, full: bool = False) -> Evidence:
    return Evidence(tuple(Row(f"t{i}", b, c) for i, (b, c) in enumerate(pairs)), full=full)


def strong(n: int = 20, **kwargs: bool) -> Evidence:
    return evidence([(0.0, 1.0)] * n, **kwargs)


def context(version: int = 0, layer: Layer = Layer.L2, more: dict[str, Head] | None = None) -> Context:
    return Context(heads={ARTIFACT: Head(version, TEXT, layer), **(more or {})})


def run(candidates: Sequence[Candidate], ctx: Context | None = None, **options: object) -> Batch:
    stage = accept_if(**options)  # type: ignore[arg-type]
    batch, _ = stage.update(Batch(tuple(candidates)), stage.init(), ctx or context())
    return batch


def outcome_of(batch: Batch, diff_id: str) -> Outcome:
    (decision,) = [d for d in batch.decisions if d.diff_id == diff_id]
    return decision.outcome


def mirrored_tie(pairs: Sequence[tuple[float, float]], same: Sequence[float]) -> list[tuple[float, float]]:
    """Rows whose deltas cancel exactly: every (b, c) also appears as (c, b); `same` adds rows with no change."""
    return [*pairs, *((c, b) for b, c in reversed(pairs)), *((s, s) for s in same)]


scores = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
binary = st.sampled_from([0.0, 1.0])


@settings(derandomize=True, max_examples=150, deadline=None)
@given(pairs=st.lists(st.tuples(st.one_of(scores, binary), st.one_of(scores, binary)), max_size=30),
       same=st.lists(scores, max_size=10), delta=st.floats(0.001, 0.499), margin=st.floats(0.0, 0.5),
       min_examples=st.integers(0, 5))
def test_exact_tie_is_never_accepted(pairs: list[tuple[float, float]], same: list[float], delta: float,
                                     margin: float, min_examples: int) -> None:
    candidate = Candidate(diff(), evidence(mirrored_tie(pairs, same)))
    batch = run([candidate], delta=delta, margin=margin, min_examples=min_examples)
    assert outcome_of(batch, candidate.diff.id) is Outcome.REJECTED
    assert batch.candidates == ()


def test_ten_thousand_exact_ties_accept_none() -> None:
    rng = np.random.default_rng(7)
    stage = accept_if()
    state, ctx, accepted = stage.init(), context(), 0
    for trial in range(10_000):
        n = int(rng.integers(0, 12))
        raw = rng.random((n, 2)) if trial % 2 else rng.integers(0, 2, size=(n, 2)).astype(float)
        pairs = [(float(b), float(c)) for b, c in raw]
        rows = mirrored_tie(pairs, rng.random(int(rng.integers(0, 3))).tolist())
        order = rng.permutation(len(rows))
        batch, state = stage.update(Batch((Candidate(diff(), evidence([rows[i] for i in order])),)), state, ctx)
        accepted += sum(d.outcome is Outcome.ACCEPTED for d in batch.decisions) + len(batch.candidates)
    assert accepted == 0
    assert state.rejected[ARTIFACT] == 10_000


def test_clear_improvement_is_accepted_and_stays_in_the_batch() -> None:
    candidate = Candidate(diff(), strong())
    batch = run([candidate])
    assert batch.candidates == (candidate,)
    (decision,) = batch.decisions
    assert decision.outcome is Outcome.ACCEPTED and decision.stage == "accept"
    assert decision.numbers["p"] > 1 - decision.numbers["delta"]
    assert batch.held == ()


def test_insignificant_gain_is_rejected_with_its_numbers() -> None:
    candidate = Candidate(diff(), evidence([(0.0, 1.0), (0.0, 1.0), (1.0, 0.0), (0.5, 0.5)]))
    batch = run([candidate])
    (decision,) = batch.decisions
    assert decision.outcome is Outcome.REJECTED and batch.candidates == ()
    assert decision.numbers["wins"] == 2 and decision.numbers["losses"] == 1 and decision.numbers["n"] == 4
    assert decision.numbers["p"] == pytest.approx(prob_improvement(2, 1, margin=0.02))
    assert decision.numbers["mean_delta"] == pytest.approx(0.25)
    assert "not significant" in decision.reason


def test_too_few_examples_are_rejected_even_when_clean() -> None:
    candidate = Candidate(diff(), strong(10))
    batch = run([candidate], min_examples=11)
    assert outcome_of(batch, candidate.diff.id) is Outcome.REJECTED
    assert "fewer than the 11 required" in batch.decisions[0].reason


def test_rebased_candidate_that_passes_is_held_for_recheck() -> None:
    candidate = Candidate(diff(), strong(), recheck=True)
    batch = run([candidate])
    assert outcome_of(batch, candidate.diff.id) is Outcome.RECHECK
    assert batch.candidates == () and batch.held == (candidate,)


def test_rebased_candidate_that_fails_is_rejected_not_rechecked() -> None:
    candidate = Candidate(diff(), evidence([(0.0, 0.0)] * 5), recheck=True)
    assert outcome_of(run([candidate]), candidate.diff.id) is Outcome.REJECTED


def test_l1_change_without_full_check_is_held_for_one() -> None:
    candidate = Candidate(diff(), strong(full=False))
    batch = run([candidate], context(layer=Layer.L1))
    assert outcome_of(batch, candidate.diff.id) is Outcome.FULL_CHECK
    assert batch.held == (candidate,) and batch.candidates == ()


def test_l1_change_with_full_check_is_accepted() -> None:
    candidate = Candidate(diff(), strong(full=True))
    batch = run([candidate], context(layer=Layer.L1))
    assert outcome_of(batch, candidate.diff.id) is Outcome.ACCEPTED
    assert batch.candidates == (candidate,)


def test_l0_change_is_refused_however_strong() -> None:
    candidate = Candidate(diff(), strong(full=True))
    batch = run([candidate], context(layer=Layer.L0))
    assert outcome_of(batch, candidate.diff.id) is Outcome.REFUSED and batch.candidates == ()


def test_best_only_accepts_the_strongest_per_artifact_and_defers_the_rest() -> None:
    best = Candidate(diff("a"), strong(30))
    good = Candidate(diff("b"), strong(12))
    also = Candidate(diff("c"), evidence([(0.0, 1.0)] * 12 + [(0.5, 0.5)] * 4))
    other = Candidate(diff("d", artifact="skills/t"), strong(12))
    ctx = context(more={"skills/t": Head(0, TEXT)})
    batch = run([good, best, also, other], ctx)
    assert {c.diff.id for c in batch.candidates} == {best.diff.id, other.diff.id}
    assert outcome_of(batch, best.diff.id) is Outcome.ACCEPTED
    assert outcome_of(batch, other.diff.id) is Outcome.ACCEPTED
    assert outcome_of(batch, good.diff.id) is Outcome.DEFERRED
    assert outcome_of(batch, also.diff.id) is Outcome.DEFERRED
    assert set(batch.held) == {good, also}


def test_best_only_breaks_exact_ties_by_the_smaller_diff_id() -> None:
    first, second = Candidate(diff("a"), strong()), Candidate(diff("b"), strong())
    winner = min(first, second, key=lambda c: c.diff.id)
    for order in ([first, second], [second, first]):
        assert run(order).candidates == (winner,)


def test_without_best_only_every_passer_is_accepted() -> None:
    candidates = [Candidate(diff(k), strong(n)) for k, n in (("a", 30), ("b", 12))]
    batch = run(candidates, best_only=False)
    assert batch.candidates == tuple(candidates)
    assert all(d.outcome is Outcome.ACCEPTED for d in batch.decisions)


def test_delta_schedule_is_read_at_the_head_version() -> None:
    candidate = Candidate(diff(), strong(7))  # p = 1 − 0.51^8 ≈ 0.9954
    schedule = linear(0.2, 0.001, steps=10)
    early = run([candidate], context(version=0), delta=schedule, looks=1)
    late = run([candidate], context(version=10), delta=schedule, looks=1)
    assert outcome_of(early, candidate.diff.id) is Outcome.ACCEPTED
    assert outcome_of(late, candidate.diff.id) is Outcome.REJECTED
    assert early.decisions[0].numbers["delta"] == pytest.approx(0.2)
    assert late.decisions[0].numbers["delta"] == pytest.approx(0.001)


def test_state_counts_verdicts_per_artifact_and_round_trips() -> None:
    stage = accept_if()
    ctx = context(more={"skills/t": Head(0, TEXT)})
    batch = Batch((Candidate(diff("a"), strong()), Candidate(diff("b"), strong(8)),
                   Candidate(diff("c"), evidence([(1.0, 0.0)] * 3)), Candidate(diff("d", "skills/t"), strong())))
    _, state = stage.update(batch, stage.init(), ctx)
    assert dict(state.accepted) == {ARTIFACT: 1, "skills/t": 1}
    assert dict(state.rejected) == {ARTIFACT: 1}
    assert dict(state.held) == {ARTIFACT: 1}
    loaded = stage.load(json.loads(json.dumps(state.to_dict())))
    assert loaded == state and loaded.to_dict() == state.to_dict()


@pytest.mark.parametrize("data", [{"accepted": {"a": -1}}, {"rejected": [1]}, {"accepted": {"a": 1.5}},
                                  {"surprise": {}}])
def test_malformed_state_dicts_are_refused(data: dict[str, object]) -> None:
    with pytest.raises(StateDictError):
        AcceptanceState.load(data)


def test_unknown_artifact_is_a_typed_error() -> None:
    with pytest.raises(UnknownArtifactError, match="skills/nope"):
        run([Candidate(diff(artifact="skills/nope"), strong())])


@pytest.mark.parametrize("options", [{"delta": 0.5}, {"delta": linear(0.3, 0.6, 5)}, {"margin": 1.0},
                                     {"min_examples": -1}, {"prior": (3.0, 1.0)}])
def test_bad_options_are_refused_when_the_stage_is_built(options: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        accept_if(**options)  # type: ignore[arg-type]


def test_a_promising_candidate_is_held_for_more_tasks_and_rejected_only_on_its_last_look() -> None:
    first = Candidate(diff(), evidence([(0.0, 1.0)] * 4 + [(0.0, 0.0)] * 6))  # 4 wins: 1 - 0.51^4 = 0.93 >= 0.8
    (held,) = run([first]).decisions
    assert held.outcome is Outcome.EXTEND and "look 2" in held.reason
    assert held.numbers["look"] == 1.0
    second = Candidate(first.diff, first.evidence, looks=2)
    (last,) = run([second]).decisions
    assert last.outcome is Outcome.REJECTED and "on look 2" in last.reason
    assert last.numbers["threshold"] == pytest.approx(1 - 0.05 * 0.3)  # the second look spends the rest of δ
    (single,) = run([first], looks=1).decisions
    assert single.outcome is Outcome.REJECTED


def test_a_tie_or_a_weak_record_is_never_held_for_more_tasks() -> None:
    tie = Candidate(diff(), evidence([(0.0, 1.0), (1.0, 0.0)] * 3))
    weak = Candidate(diff(), evidence([(0.0, 1.0), (0.0, 1.0), (1.0, 0.0)]))  # 2 wins 1 loss: 0.5 < 0.8
    assert [d.outcome for d in run([tie]).decisions] == [Outcome.REJECTED]
    assert [d.outcome for d in run([weak]).decisions] == [Outcome.REJECTED]


def test_the_looks_share_delta_between_them() -> None:
    first, second = (run([Candidate(diff(), strong(3), looks=look)]).decisions[0] for look in (1, 2))
    assert first.numbers["delta"] + second.numbers["delta"] == pytest.approx(0.05)
    with pytest.raises(ConfigError):
        accept_if(looks=0)
    with pytest.raises(ConfigError):
        accept_if(promise=0.5)


def test_a_change_whose_extension_was_spent_replicates_when_proposed_again_instead_of_repeating_it() -> None:
    stage = accept_if()
    rows = evidence([(0.0, 1.0)] * 4 + [(0.0, 0.0)] * 6)  # promising at look 1, short of significance at look 2
    first = Candidate(Diff(ARTIFACT, 0, diff().ops, author="w1"), rows, origin="t0")
    batch, state = stage.update(Batch((first,)), stage.init(), context())
    assert batch.decisions[0].outcome is Outcome.EXTEND and "held for more tasks" in batch.decisions[0].reason
    assert state.spent == ()  # held, not turned down: nothing spent yet
    batch, state = stage.update(Batch((replace(first, looks=2),)), state, context())
    assert batch.decisions[0].outcome is Outcome.REJECTED and len(state.spent) == 1
    again = Candidate(Diff(ARTIFACT, 0, diff().ops, author="w2"), rows, origin="t5")  # the same change anew
    batch, state = stage.update(Batch((again,)), state, context())
    (decision,) = batch.decisions
    assert decision.outcome is Outcome.EXTEND
    assert "a replication" in decision.reason and "turned down at a later look before" in decision.reason
    other = Candidate(Diff(ARTIFACT, 0, diff("beta").ops, author="w3"), rows, origin="t5")  # another change
    batch, _ = stage.update(Batch((other,)), state, context())
    assert "held for more tasks (look 2)" in batch.decisions[0].reason
    no_origin = Candidate(Diff(ARTIFACT, 0, diff().ops, author="w4"), rows)  # nothing to replicate: extended
    batch, _ = stage.update(Batch((no_origin,)), state, context())
    assert "held for more tasks (look 2)" in batch.decisions[0].reason
    loaded = stage.load(json.loads(json.dumps(state.to_dict())))
    assert loaded == state and loaded.spent == state.spent
    harmful = Candidate(first.diff, evidence([(0.0, 1.0)] * 3 + [(1.0, 0.0)] * 8), looks=2, origin="t0")
    quiet = Context(heads={ARTIFACT: Head(0, TEXT)}, noise=NoiseEstimate(200.0, 4.0, 400.0, 8.0))
    batch, kept = stage.update(Batch((harmful,)), stage.init(), quiet)
    assert "harmful" in batch.decisions[0].reason and kept.spent == ()  # turned down for harm: nothing spent
    with pytest.raises(StateDictError, match="spent"):
        AcceptanceState.load({"spent": [3]})
