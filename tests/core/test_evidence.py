"""Evidence validation: NaN, out-of-range scores, mismatched or unknown task ids are clear typed errors."""

from __future__ import annotations

import math

import pytest

from agentgrad.core.evidence import Evidence, Row, concatenate
from agentgrad.errors import InvalidEvidenceError


@pytest.mark.parametrize("score", [math.nan, -0.1, 1.5, math.inf, "1", True, None])
def test_scores_outside_unit_interval_or_not_numbers_are_refused(score: object) -> None:
    with pytest.raises(InvalidEvidenceError, match="t1"):
        Evidence.paired({"t1": 0.5}, {"t1": score})  # type: ignore[dict-item]


def test_base_and_candidate_on_different_tasks_are_refused() -> None:
    with pytest.raises(InvalidEvidenceError, match="different tasks"):
        Evidence.paired({"t1": 0.0}, {"t2": 1.0})


def test_duplicate_task_ids_are_refused() -> None:
    with pytest.raises(InvalidEvidenceError, match="twice"):
        Evidence((Row("t", 0, 1), Row("t", 1, 0)))


def test_unknown_task_ids_are_named() -> None:
    evidence = Evidence.paired({"t1": 0.0, "ghost": 1.0}, {"t1": 1.0, "ghost": 1.0})
    with pytest.raises(InvalidEvidenceError, match="ghost"):
        evidence.check_tasks({"t1"})


def test_wins_and_losses_are_the_positive_and_negative_parts_of_the_deltas() -> None:
    evidence = Evidence.paired({"a": 0.0, "b": 1.0, "c": 0.2}, {"a": 1.0, "b": 0.5, "c": 0.2})
    assert evidence.wins_losses() == pytest.approx((1.0, 0.5))
    assert evidence.mean_delta() == pytest.approx(0.5 / 3)


def test_evidence_round_trips_through_its_dict() -> None:
    evidence = Evidence.paired({"a": 0.0}, {"a": 1.0}, base_version=2, full=True, cost=0.5, tokens=9,
                               traces=("x",))
    assert Evidence.from_dict(evidence.to_dict()) == evidence


def test_concatenated_evidence_keeps_every_part_as_separate_rows() -> None:
    one = Evidence.paired({"a": 0.0}, {"a": 1.0}, cost=1.0)
    two = Evidence.paired({"a": 0.0, "b": 0.0}, {"a": 0.0, "b": 1.0}, cost=2.0)
    fused = concatenate([("d1", one), ("d2", two)])
    assert fused.task_ids == ("d1:a", "d2:a", "d2:b")
    assert fused.wins_losses() == (2.0, 0.0) and fused.cost == 3.0
