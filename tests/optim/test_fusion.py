"""`fuse`: components are kept only for a significant leave-one-out gain; the kept ones become one diff."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgrad.core.decision import Outcome
from agentgrad.core.diff import Diff, apply, apply_ops
from agentgrad.core.evidence import Evidence, Row
from agentgrad.core.ops import Op
from agentgrad.errors import StateDictError
from agentgrad.optim.acceptance import accept_if
from agentgrad.optim.base import Batch, Candidate, Context, Head
from agentgrad.optim.chain import chain
from agentgrad.optim.fusion import FusionState, fuse
from agentgrad.optim.judge import judge
from agentgrad.optim.noise import NoiseEstimate

ARTIFACT = "skills/s"
TEXT = "intro: hello\nstyle: terse\n"


def diff(key: str, *, base: int = 0, artifact: str = ARTIFACT, rationale: str = "") -> Diff:
    return Diff(artifact, base, (Op.add("key", f"{key}: use method {len(key)}"),), rationale=rationale)


def deltas_evidence(deltas: Sequence[float]) -> Evidence:
    rows = tuple(Row(f"t{i}", 0.0, d) if d >= 0 else Row(f"t{i}", -d, 0.0) for i, d in enumerate(deltas))
    return Evidence(rows, base_version=0)


def strong(n: int = 20) -> Evidence:
    return deltas_evidence([1.0] * n)


def junk(n: int = 20) -> Evidence:
    return deltas_evidence([0.0] * n)


def context(version: int = 0, more: dict[str, Head] | None = None) -> Context:
    return Context(heads={ARTIFACT: Head(version, TEXT), **(more or {})})


def run(candidates: Sequence[Candidate], ctx: Context | None = None) -> tuple[Batch, FusionState]:
    stage = fuse()
    return stage.update(Batch(tuple(candidates)), stage.init(), ctx or context())


def outcomes(batch: Batch) -> dict[str, Outcome]:
    return {d.diff_id: d.outcome for d in batch.decisions}


def test_strong_edits_are_fused_into_one_candidate() -> None:
    parts = [Candidate(diff("beta", rationale="b"), strong(15)), Candidate(diff("alpha", rationale="a"), strong())]
    batch, state = run(parts)
    (fused,) = batch.candidates
    assert fused.diff.id.startswith("f") and len(fused.diff.id) == 16
    assert fused.diff.author == "fusion" and fused.diff.base_version == 0
    assert fused.parts == tuple(sorted((c.diff for c in parts), key=lambda d: d.id))
    assert fused.diff.rationale == "; ".join(p.rationale for p in fused.parts)
    assert len(fused.evidence.rows) == 35
    assert {r.task_id.split(":")[0] for r in fused.evidence.rows} == {c.diff.id for c in parts}
    assert outcomes(batch) == {c.diff.id: Outcome.FUSED for c in parts}
    assert all(fused.diff.id in d.reason for d in batch.decisions)
    assert state == FusionState(groups_fused=1, components_fused=2, components_dropped=0)


def test_fused_diff_applies_to_head_and_equals_applying_the_kept_parts_in_order() -> None:
    parts = [Candidate(diff(k), strong()) for k in ("gamma", "alpha", "beta")]
    batch, _ = run(parts)
    (fused,) = batch.candidates
    expected = TEXT
    for part in sorted(parts, key=lambda c: c.diff.id):
        expected = apply(part.diff, expected)
    assert apply(fused.diff, TEXT) == expected
    assert apply_ops(TEXT, [op for p in fused.parts for op in p.ops]) == expected


def test_fusion_is_deterministic_whatever_the_batch_order() -> None:
    parts = [Candidate(diff(k), strong()) for k in ("gamma", "alpha", "beta")]
    first, _ = run(parts)
    second, _ = run(list(reversed(parts)))
    assert first.candidates == second.candidates


def test_junk_never_rides_along_with_a_strong_edit() -> None:
    good, other, bad = (Candidate(diff("alpha"), strong()), Candidate(diff("gamma"), strong()),
                        Candidate(diff("beta"), junk()))
    batch, state = run([good, other, bad])
    fused, alone = batch.candidates
    assert set(fused.parts) == {good.diff, other.diff}  # the junk is not in the fusion
    assert alone == bad  # it goes on alone, for the acceptance stage to reject
    assert outcomes(batch) == {good.diff.id: Outcome.FUSED, other.diff.id: Outcome.FUSED}
    assert state == FusionState(groups_fused=1, components_fused=2, components_dropped=1)
    lone, _ = run([good, bad])
    assert lone.candidates == (good, bad) and not lone.decisions  # one significant component: nothing to fuse


deltas = st.floats(min_value=-1.0, max_value=1.0, allow_nan=False)
harmful = st.lists(st.floats(min_value=-1.0, max_value=0.0), min_size=0, max_size=25)
anything = st.lists(st.one_of(deltas, st.just(1.0)), min_size=0, max_size=25)


@settings(derandomize=True, max_examples=120, deadline=None)
@given(components=st.lists(st.tuples(st.booleans(), harmful, anything), min_size=2, max_size=5))
def test_fusion_never_keeps_a_component_without_a_significant_own_gain(
        components: list[tuple[bool, list[float], list[float]]]) -> None:
    candidates = [Candidate(diff(f"k{i}"), deltas_evidence(bad if is_bad else other))
                  for i, (is_bad, bad, other) in enumerate(components)]
    batch, _ = run(candidates)
    decided = outcomes(batch)
    fused = {p.id for c in batch.candidates for p in c.parts}
    significant = {c.diff.id for c in candidates
                   if judge(c.evidence, delta=0.05, margin=0.02, noise=None).passes}
    for candidate, (is_bad, _, _) in zip(candidates, components, strict=True):
        if is_bad:
            assert candidate.diff.id not in fused and candidate.diff.id not in decided
    assert fused == (significant if len(significant) >= 2 else set())
    assert all(decided[d] is Outcome.FUSED for d in fused)
    alone = [c.diff.id for c in batch.candidates if not c.parts]
    assert sorted(alone) == sorted(c.diff.id for c in candidates if c.diff.id not in fused)


def test_rechecked_candidates_pass_through_untouched() -> None:
    rebased = [Candidate(diff("alpha"), strong(), recheck=True), Candidate(diff("beta"), junk(), recheck=True)]
    fresh = Candidate(diff("gamma"), strong())
    batch, _ = run([*rebased, fresh])
    assert batch.candidates == (*rebased, fresh)
    assert batch.decisions == ()


def test_a_lone_candidate_passes_through_even_when_weak() -> None:
    lone = Candidate(diff("alpha"), junk())
    batch, _ = run([lone])
    assert batch.candidates == (lone,) and batch.decisions == ()


def test_groups_not_based_on_the_head_pass_through_unfused() -> None:
    group = [Candidate(diff("alpha", base=0), strong()), Candidate(diff("beta", base=1), junk())]
    batch, _ = run(group, context(version=1))
    assert batch.candidates == tuple(group) and batch.decisions == ()


def test_a_union_that_does_not_apply_falls_back_to_the_parts() -> None:
    clash = [Candidate(Diff(ARTIFACT, 0, (Op.add("key", "alpha: one"),)), strong()),
             Candidate(Diff(ARTIFACT, 0, (Op.add("key", "Alpha: two"),)), strong()),
             Candidate(diff("beta"), junk())]
    batch, state = run(clash)
    assert batch.candidates == tuple(clash)
    assert not batch.decisions
    assert state.groups_fused == 0


def test_artifacts_are_fused_separately() -> None:
    ctx = context(more={"skills/t": Head(0, TEXT)})
    mine = [Candidate(diff(k), strong()) for k in ("alpha", "beta")]
    theirs = [Candidate(diff(k, artifact="skills/t"), strong()) for k in ("alpha", "beta")]
    batch, state = run([mine[0], theirs[0], mine[1], theirs[1]], ctx)
    assert [c.diff.artifact_id for c in batch.candidates] == [ARTIFACT, "skills/t"]
    assert all(len(c.parts) == 2 for c in batch.candidates)
    assert state.groups_fused == 2


def test_fused_candidate_is_then_accepted_as_a_whole() -> None:
    pipeline = chain(fuse(), accept_if())
    parts = [Candidate(diff(k), strong()) for k in ("alpha", "beta")]
    batch, _ = pipeline.update(Batch(tuple(parts)), pipeline.init(), context())
    (fused,) = batch.candidates
    accepted = [d for d in batch.decisions if d.outcome is Outcome.ACCEPTED]
    assert [d.diff_id for d in accepted] == [fused.diff.id]
    assert accepted[0].parts == tuple(p.id for p in fused.parts)


def test_state_round_trips_through_a_json_dict() -> None:
    _, state = run([Candidate(diff("alpha"), strong()), Candidate(diff("beta"), strong()),
                    Candidate(diff("gamma"), junk())])
    assert state == FusionState(groups_fused=1, components_fused=2, components_dropped=1)
    assert fuse().load(json.loads(json.dumps(state.to_dict()))) == state


@pytest.mark.parametrize("data", [{"groups_fused": -1}, {"components_dropped": "3"}, {"unknown": 1}])
def test_malformed_state_dicts_are_refused(data: dict[str, object]) -> None:
    with pytest.raises(StateDictError):
        FusionState.load(data)


def _closing(key: str, origin: str) -> Candidate:
    """A candidate with four full wins in the four contexts a run had for its origin task, on its closing look."""
    marks = tuple(f"{origin}@{k:012x}" for k in range(4))
    rows = (*(Row(f"t{i:02d}", 1.0, 1.0) for i in range(8)), *(Row(m, 0.0, 1.0) for m in marks))
    return Candidate(diff(key), Evidence(rows, base_version=0, replicas=marks), looks=2, origin=origin,
                     replicate=True, closing=True)


def test_candidates_passing_on_their_closing_looks_are_fused_into_one_change() -> None:
    """The budget's last step: one change per artifact is committed a step, so two that pass only on their closing
    looks would leave one undecided unless fusion judges them as the acceptance stage does."""
    parts = [_closing("alpha", "t90"), _closing("beta", "t91")]
    noise = NoiseEstimate(win_room=100.0, wins=32.0, loss_room=140.0, losses=5.0)  # a bound of about 0.17
    ctx = Context(heads={ARTIFACT: Head(0, TEXT)}, noise=noise)
    assert not any(judge(c.evidence, delta=0.015, margin=0.02, noise=noise).passes for c in parts)
    stage = fuse(looks=2)  # as the runtime's: a second look at 0.3 of δ
    batch, state = stage.update(Batch(tuple(parts)), stage.init(), ctx)
    assert outcomes(batch) == {c.diff.id: Outcome.FUSED for c in parts} and state.groups_fused == 1
    (fused,) = batch.candidates
    accepted, _ = accept_if(looks=2).update(batch, accept_if(looks=2).init(), ctx)
    assert outcomes(accepted)[fused.diff.id] is Outcome.ACCEPTED
