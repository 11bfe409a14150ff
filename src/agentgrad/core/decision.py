"""Why a diff was kept or not: one `Decision` per diff per step, with the stage, the reason and the numbers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class Outcome(str, Enum):
    """What happened to a diff.

    Final outcomes end the diff's life; `RECHECK`, `FULL_CHECK`, `DEFERRED` and `EXTEND` send it back to the
    runtime, which evaluates it again (on the new head, on the whole validation split, later, or on more tasks,
    its evidence so far kept) and resubmits it.
    """

    ACCEPTED = "accepted"
    REJECTED = "rejected"
    STALE = "stale"
    CONFLICT = "conflict"
    FUSED = "fused"
    DROPPED = "dropped"
    DUPLICATE = "duplicate"
    TABU = "tabu"
    REFUSED = "refused"
    TOO_LARGE = "too_large"
    REVERTED = "reverted"
    RECHECK = "recheck"
    FULL_CHECK = "full_check"
    DEFERRED = "deferred"
    EXTEND = "extend"

    @property
    def final(self) -> bool:
        """False for outcomes that send the diff back for more evidence."""
        return self not in (Outcome.RECHECK, Outcome.FULL_CHECK, Outcome.DEFERRED, Outcome.EXTEND)


@dataclass(frozen=True)
class Decision:
    """One verdict on one diff.

    Args:
        diff_id: the diff decided on.
        artifact_id: the artifact it edits.
        outcome: what happened.
        stage: the optimizer stage that decided.
        reason: a sentence a person can read.
        numbers: the figures behind it (posterior, margin, lag, shared examples, ...).
        fingerprint: the diff's normalised identity (see `fingerprint`), for tabu.
        parts: for a fused diff, the ids of the diffs it was made of.
    """

    diff_id: str
    artifact_id: str
    outcome: Outcome
    stage: str
    reason: str
    numbers: Mapping[str, float] = field(default_factory=dict)
    fingerprint: str = ""
    parts: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; `Decision.from_dict` reverses it."""
        return {"diff_id": self.diff_id, "artifact_id": self.artifact_id, "outcome": self.outcome.value,
                "stage": self.stage, "reason": self.reason, "numbers": dict(self.numbers),
                "fingerprint": self.fingerprint, "parts": list(self.parts)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Decision:
        """Build a decision from `to_dict` output."""
        return cls(data["diff_id"], data["artifact_id"], Outcome(data["outcome"]), data["stage"], data["reason"],
                   dict(data.get("numbers", {})), data.get("fingerprint", ""), tuple(data.get("parts", ())))


@dataclass(frozen=True)
class Standing:
    """Where one diff stands: its latest verdict and how many verdicts it has had (`Store.standings`).

    Args:
        diff_id: the diff.
        artifact_id: the artifact its latest decision names.
        outcome: its latest outcome.
        decisions: how many decisions it has (re-checks and extensions count).
    """

    diff_id: str
    artifact_id: str
    outcome: Outcome
    decisions: int
