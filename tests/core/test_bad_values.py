"""The core values refuse bad input with their own typed error and a one-line message, never a raw ValueError,
TypeError or AttributeError from deeper down."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from agentgrad.core.artifact import Artifact, Kind
from agentgrad.core.diff import Diff
from agentgrad.core.evidence import Evidence, Row
from agentgrad.core.ops import Action, Op
from agentgrad.core.units import Scope
from agentgrad.errors import AgentgradError, InvalidEvidenceError, InvalidOpError

OP = Op(Action.ADD, Scope.RULE, new="- answer in one word")
ROW = Row("t1", 0.0, 1.0)
Bad = Callable[[], Any]

CASES: list[tuple[str, Bad, type[AgentgradError], str]] = [
    ("kind not a Kind", lambda: Artifact("a", "bogus", "x"),  # type: ignore[arg-type]
     InvalidOpError, r"artifact 'a': kind must be one of 'prompt', 'skill', .* got 'bogus'"),
    ("kind None", lambda: Artifact("a", None, "x"),  # type: ignore[arg-type]
     InvalidOpError, r"artifact 'a': kind must be one of .* got None"),
    ("layer not a Layer", lambda: Artifact("a", Kind.SKILL, "x", "L9"),  # type: ignore[arg-type]
     InvalidOpError, r"artifact 'a': layer must be one of 'L0', 'L1', 'L2', got 'L9'"),
    ("layer int", lambda: Artifact("a", Kind.SKILL, "x", 3),  # type: ignore[arg-type]
     InvalidOpError, r"layer must be one of 'L0', 'L1', 'L2', got 3"),
    ("diff ops None", lambda: Diff("a", 0, None),  # type: ignore[arg-type]
     InvalidOpError, r"Diff.ops .* must be a sequence of Op values, got NoneType"),
    ("diff ops of str", lambda: Diff("a", 0, ("- x",)),  # type: ignore[arg-type]
     InvalidOpError, r"must hold only Op values, got str at index 0"),
    ("diff base True", lambda: Diff("a", True, (OP,)), InvalidOpError, r"base_version must be a non-negative int"),
    ("evidence rows None", lambda: Evidence(None),  # type: ignore[arg-type]
     InvalidEvidenceError, r"evidence rows must be a sequence of Row values, got NoneType"),
    ("evidence rows of tuples", lambda: Evidence((("t", 0.0, 1.0),)),  # type: ignore[arg-type]
     InvalidEvidenceError, r"evidence rows must hold only Row values, got tuple at index 0"),
    ("evidence cost str", lambda: Evidence((ROW,), cost="1"),  # type: ignore[arg-type]
     InvalidEvidenceError, r"cost and tokens must be finite and >= 0, got '1', 0"),
    ("evidence cost NaN", lambda: Evidence((ROW,), cost=math.nan), InvalidEvidenceError, r"got nan, 0"),
    ("evidence tokens None", lambda: Evidence((ROW,), tokens=None),  # type: ignore[arg-type]
     InvalidEvidenceError, r"got 0.0, None"),
    ("evidence base_version str", lambda: Evidence((ROW,), base_version="1"),  # type: ignore[arg-type]
     InvalidEvidenceError, r"base_version must be None or an int >= 0, got '1'"),
]


@pytest.mark.parametrize(("make", "error", "says"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_bad_core_value_is_its_typed_error_in_one_line(make: Bad, error: type[AgentgradError], says: str) -> None:
    with pytest.raises(error, match=says) as caught:
        make()
    assert "\n" not in str(caught.value)


def test_an_artifact_still_takes_its_kind_and_layer_by_value() -> None:
    artifact = Artifact("a", "skill", "x", "L0")  # type: ignore[arg-type]
    assert artifact.kind is Kind.SKILL and artifact.frozen
