"""`limit_size`: the trust region. A diff with too many ops or too many changed characters is refused.

Small steps keep the evidence meaningful: a large rewrite scored on a handful of examples says little about which
of its parts helped, and undoing it costs more. `TrustRegion` is the limit as a value: the stage applies it in a
step, and the runtime applies the same value to a new diff before spending any evaluation on it.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentgrad.core._checks import integer
from agentgrad.core.decision import Decision, Outcome
from agentgrad.core.diff import Diff
from agentgrad.optim.base import Batch, Candidate, Context, EmptyState, Stage, stateless, verdict

STAGE = "trust_region"


@dataclass(frozen=True)
class TrustRegion:
    """The largest diff that may be committed.

    Args:
        max_ops: the most ops a diff may have.
        max_chars: the most characters a diff may add or remove (`Diff.changed_chars`).
    """

    max_ops: int = 8
    max_chars: int = 4000

    def __post_init__(self) -> None:
        integer(self.max_ops, "max_ops", low=1)
        integer(self.max_chars, "max_chars", low=1)

    def outside(self, diff: Diff) -> str | None:
        """Why `diff` is outside the region ("9 ops > 8 allowed; ..."), or None if it is inside."""
        ops, chars = len(diff.ops), diff.changed_chars()
        too_big = [f"{ops} ops > {self.max_ops} allowed"] if ops > self.max_ops else []
        too_big += [f"{chars} changed characters > {self.max_chars} allowed"] if chars > self.max_chars else []
        return "; ".join(too_big) or None

    def numbers(self, diff: Diff) -> dict[str, float]:
        """The figures a TOO_LARGE verdict carries."""
        return {"ops": float(len(diff.ops)), "max_ops": float(self.max_ops),
                "changed_chars": float(diff.changed_chars()), "max_chars": float(self.max_chars)}


def limit_size(*, max_ops: int = 8, max_chars: int = 4000) -> Stage[EmptyState]:
    """A stateless stage named "trust_region" that marks oversize diffs TOO_LARGE.

    Args:
        max_ops: the most ops a diff may have.
        max_chars: the most characters a diff may add or remove (`Diff.changed_chars`).
    """
    region = TrustRegion(max_ops, max_chars)

    def update(batch: Batch, ctx: Context) -> Batch:
        verdicts: dict[str, tuple[Candidate, Decision]] = {}
        for candidate in batch.candidates:
            reason = region.outside(candidate.diff)
            if reason is not None:
                verdicts[candidate.diff.id] = (candidate, verdict(
                    candidate, Outcome.TOO_LARGE, STAGE, "outside the trust region: " + reason,
                    region.numbers(candidate.diff)))
        return batch.settle(verdicts) if verdicts else batch

    return stateless(STAGE, update)
