"""`limit_size`: the trust region. A diff with too many ops or too many changed characters is refused.

Small steps keep the evidence meaningful: a large rewrite scored on a handful of examples says little about which
of its parts helped, and undoing it costs more.
"""

from __future__ import annotations

from agentgrad.core.decision import Decision, Outcome
from agentgrad.errors import ConfigError
from agentgrad.optim.base import Batch, Candidate, Context, EmptyState, Stage, stateless, verdict

STAGE = "trust_region"


def _check_limit(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{what} must be a positive int, got {value!r}")
    return value


def limit_size(*, max_ops: int = 8, max_chars: int = 4000) -> Stage[EmptyState]:
    """A stateless stage named "trust_region" that marks oversize diffs TOO_LARGE.

    Args:
        max_ops: the most ops a diff may have.
        max_chars: the most characters a diff may add or remove (`Diff.changed_chars`).
    """
    _check_limit(max_ops, "max_ops")
    _check_limit(max_chars, "max_chars")

    def update(batch: Batch, ctx: Context) -> Batch:
        verdicts: dict[str, tuple[Candidate, Decision]] = {}
        for candidate in batch.candidates:
            ops, chars = len(candidate.diff.ops), candidate.diff.changed_chars()
            if ops <= max_ops and chars <= max_chars:
                continue
            too_big = [f"{ops} ops > {max_ops} allowed"] if ops > max_ops else []
            too_big += [f"{chars} changed characters > {max_chars} allowed"] if chars > max_chars else []
            numbers = {"ops": float(ops), "max_ops": float(max_ops), "changed_chars": float(chars),
                       "max_chars": float(max_chars)}
            verdicts[candidate.diff.id] = (candidate, verdict(
                candidate, Outcome.TOO_LARGE, STAGE, "outside the trust region: " + "; ".join(too_big), numbers))
        return batch.settle(verdicts) if verdicts else batch

    return stateless(STAGE, update)
