"""`limit_size`: diffs outside the trust region are refused as TOO_LARGE; the rest pass untouched."""

from __future__ import annotations

import pytest

from agentgrad.core.decision import Outcome
from agentgrad.core.diff import Diff
from agentgrad.core.evidence import Evidence, Row
from agentgrad.core.ops import Op
from agentgrad.optim.base import Batch, Candidate, Context, Head
from agentgrad.optim.trust_region import limit_size

ARTIFACT = "skills/s"
CTX = Context(heads={ARTIFACT: Head(0, "intro: hello\n")})
EVIDENCE = Evidence((Row("t0", 0.0, 1.0),))


def candidate(n_ops: int, value_chars: int = 10) -> Candidate:
    ops = tuple(Op.add("key", f"k{i}: {'x' * value_chars}") for i in range(n_ops))
    return Candidate(Diff(ARTIFACT, 0, ops), EVIDENCE)


def run(candidates: list[Candidate], **limits: int) -> Batch:
    stage = limit_size(**limits)
    batch, _ = stage.update(Batch(tuple(candidates)), stage.init(), CTX)
    return batch


def test_small_diffs_pass_untouched() -> None:
    small = [candidate(1), candidate(8)]
    batch = run(small)
    assert batch.candidates == tuple(small) and batch.decisions == ()


def test_too_many_ops_is_refused_with_its_numbers() -> None:
    big, small = candidate(9), candidate(2)
    batch = run([big, small])
    assert batch.candidates == (small,)
    (decision,) = batch.decisions
    assert decision.diff_id == big.diff.id and decision.outcome is Outcome.TOO_LARGE
    assert decision.stage == "trust_region"
    assert decision.numbers["ops"] == 9 and decision.numbers["max_ops"] == 8
    assert "9 ops > 8" in decision.reason


def test_too_many_changed_characters_is_refused() -> None:
    big = candidate(1, value_chars=200)
    chars = big.diff.changed_chars()
    assert run([big], max_chars=chars).decisions == ()
    (decision,) = run([big], max_chars=chars - 1).decisions
    assert decision.outcome is Outcome.TOO_LARGE
    assert decision.numbers["changed_chars"] == chars
    assert "changed characters" in decision.reason


def test_limits_are_inclusive() -> None:
    exact = candidate(3)
    assert run([exact], max_ops=3, max_chars=exact.diff.changed_chars()).candidates == (exact,)


@pytest.mark.parametrize("limits", [{"max_ops": 0}, {"max_chars": 0}, {"max_ops": -3}])
def test_non_positive_limits_are_refused(limits: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        limit_size(**limits)
