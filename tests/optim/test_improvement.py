"""`accept_if_better`: a mean gain above the margin commits, a tie or a loss never does, and it holds what
`accept_if` holds."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from agentgrad.core.artifact import Layer
from agentgrad.core.decision import Outcome
from agentgrad.core.diff import Diff
from agentgrad.core.evidence import Evidence, Row
from agentgrad.core.ops import Op
from agentgrad.errors import ConfigError
from agentgrad.optim.acceptance import AcceptanceState
from agentgrad.optim.base import Batch, Candidate, Context, Head
from agentgrad.optim.improvement import accept_if_better

ARTIFACT = "skills/s"


def _candidate(pairs: Sequence[tuple[float, float]], key: str = "a", *, full: bool = True,
               recheck: bool = False) -> Candidate:
    diff = Diff(ARTIFACT, 0, (Op.add("key", f"{key}: use method 3"),))
    evidence = Evidence(tuple(Row(f"t{i}", b, c) for i, (b, c) in enumerate(pairs)), full=full)
    return Candidate(diff, evidence, recheck=recheck)


def _run(candidates: Sequence[Candidate], layer: Layer = Layer.L2, **options: object) -> tuple[Batch, AcceptanceState]:
    stage = accept_if_better(**options)  # type: ignore[arg-type]
    return stage.update(Batch(tuple(candidates)), stage.init(), Context(heads={ARTIFACT: Head(0, "x", layer)}))


def _outcomes(batch: Batch) -> list[Outcome]:
    return [d.outcome for d in batch.decisions]


def test_a_single_win_with_no_loss_is_accepted_where_the_sign_test_would_hold_it() -> None:
    batch, state = _run([_candidate([(0.0, 1.0)] + [(0.5, 0.5)] * 9)])
    assert _outcomes(batch) == [Outcome.ACCEPTED] and len(batch.candidates) == 1
    assert state.accepted == {ARTIFACT: 1}
    assert "mean gain +0.1000 over 10 task(s) (1 wins, 0 losses)" in batch.decisions[0].reason


@pytest.mark.parametrize("pairs", [[(0.5, 0.5)] * 6, [(0.0, 1.0), (1.0, 0.0)] * 3, [(1.0, 0.0), (0.5, 0.5)], []])
def test_a_tie_a_loss_or_no_evidence_is_rejected(pairs: list[tuple[float, float]]) -> None:
    batch, _ = _run([_candidate(pairs)])
    assert _outcomes(batch) == [Outcome.REJECTED] and not batch.candidates


def test_the_margin_is_a_strict_floor_on_the_mean_gain() -> None:
    at, _ = _run([_candidate([(0.0, 1.0), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0)])], margin=0.25)
    above, _ = _run([_candidate([(0.0, 1.0), (0.0, 1.0), (0.0, 0.0), (0.0, 0.0)])], margin=0.25)
    assert _outcomes(at) == [Outcome.REJECTED] and _outcomes(above) == [Outcome.ACCEPTED]


def test_only_the_best_mean_gain_per_artifact_is_accepted_in_one_step() -> None:
    batch, _ = _run([_candidate([(0.0, 1.0), (0.0, 0.0)], "a"), _candidate([(0.0, 1.0), (0.0, 1.0)], "b")])
    assert _outcomes(batch) == [Outcome.DEFERRED, Outcome.ACCEPTED]


def test_rebased_l1_unchecked_and_l0_candidates_are_held_or_refused() -> None:
    win = [(0.0, 1.0)] * 3
    assert _outcomes(_run([_candidate(win, recheck=True)])[0]) == [Outcome.RECHECK]
    assert _outcomes(_run([_candidate(win, full=False)], Layer.L1)[0]) == [Outcome.FULL_CHECK]
    assert _outcomes(_run([_candidate(win)], Layer.L1)[0]) == [Outcome.ACCEPTED]
    assert _outcomes(_run([_candidate(win)], Layer.L0)[0]) == [Outcome.REFUSED]


def test_min_examples_rejects_thin_evidence() -> None:
    batch, _ = _run([_candidate([(0.0, 1.0)] * 2)], min_examples=3)
    assert _outcomes(batch) == [Outcome.REJECTED] and "fewer than the 3 required" in batch.decisions[0].reason


@pytest.mark.parametrize("options", [{"margin": -0.1}, {"margin": 1.0}, {"margin": "x"}, {"min_examples": -1}])
def test_bad_settings_are_a_config_error(options: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        accept_if_better(**options)  # type: ignore[arg-type]
