"""`govern`: enforce each artifact's layer. L0 is frozen, L1 takes one change at a time, L2 merges freely.

An L1 change (harness, verifier) must pass a full held-out check before it lands; while one is out for that check
(the acceptance stage gave it FULL_CHECK), other changes of the same artifact wait. The slot is freed when the
pending diff gets a final outcome; a runtime that gives up on it frees the slot by reporting a final decision
(e.g. DROPPED) to `observe`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from agentgrad.core._checks import integer
from agentgrad.core.artifact import Layer
from agentgrad.core.decision import Decision, Outcome
from agentgrad.errors import StateDictError, UnknownArtifactError
from agentgrad.optim.base import Batch, Candidate, Context, Stage, verdict

NAME = "governance"


@dataclass(frozen=True)
class GovernanceState:
    """What `govern` keeps.

    Args:
        pending: per L1 artifact, the id of the diff out for a full held-out check.
        refused: how many diffs touched an L0 artifact.
        deferred: how many L1 diffs were held back.
    """

    pending: Mapping[str, str] = field(default_factory=dict)
    refused: int = 0
    deferred: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "pending", MappingProxyType(dict(self.pending)))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; `GovernanceState.load` reverses it."""
        return {"pending": dict(sorted(self.pending.items())), "refused": self.refused, "deferred": self.deferred}

    @classmethod
    def load(cls, data: Mapping[str, Any]) -> GovernanceState:
        """Rebuild a state from `to_dict` output; raises `StateDictError` on anything malformed."""
        pending = data.get("pending", {})
        if not isinstance(pending, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) and v for k, v in pending.items()):
            raise StateDictError(f"{NAME}: 'pending' must map artifact ids to diff ids, got {pending!r}")
        counts = {name: data.get(name, 0) for name in ("refused", "deferred")}
        for name, value in counts.items():
            integer(value, f"{NAME}: counter {name!r}", low=0, error=StateDictError)
        return cls(pending, **counts)


def _layer(candidate: Candidate, ctx: Context) -> Layer:
    head = ctx.heads.get(candidate.diff.artifact_id)
    if head is None:
        raise UnknownArtifactError(
            f"{NAME}: diff {candidate.diff.id} edits unknown artifact {candidate.diff.artifact_id!r}")
    return head.layer


def _best_first(candidate: Candidate) -> tuple[float, str]:
    return -candidate.evidence.mean_delta(), candidate.diff.id


def _serialize(l1: Sequence[Candidate], pending: Mapping[str, str]) -> dict[str, tuple[Candidate, Decision]]:
    """DEFERRED verdicts for the L1 candidates that must wait: one per artifact goes on, the pending one if set."""
    verdicts: dict[str, tuple[Candidate, Decision]] = {}
    for artifact_id in sorted({c.diff.artifact_id for c in l1}):
        group = sorted((c for c in l1 if c.diff.artifact_id == artifact_id), key=_best_first)
        slot = pending.get(artifact_id)
        if slot is not None:
            chosen = next((c for c in group if c.diff.id == slot), None)
            reason = f"{slot} is out for a full check on {artifact_id!r}; L1 takes one change at a time"
        else:
            chosen = group[0]
            reason = f"{chosen.diff.id} goes first on {artifact_id!r}; L1 takes one change at a time"
        for candidate in group:
            if candidate is chosen:
                continue
            numbers = {"mean_delta": candidate.evidence.mean_delta()}
            verdicts[candidate.diff.id] = (candidate, verdict(candidate, Outcome.DEFERRED, NAME, reason, numbers))
    return verdicts


def govern() -> Stage[GovernanceState]:
    """A stage that refuses L0 diffs, serializes L1 diffs (one in flight per artifact) and passes L2 diffs.

    Within a batch at most one L1 candidate per artifact passes: the pending one if a slot is taken, else the
    best by mean delta (ties by smaller id); the others are DEFERRED (held). `observe` takes the slot for a diff
    that got FULL_CHECK and frees it when that diff gets a final outcome.
    State: `GovernanceState` (pending slots and counters).
    """

    def update(batch: Batch, state: GovernanceState, ctx: Context) -> tuple[Batch, GovernanceState]:
        verdicts: dict[str, tuple[Candidate, Decision]] = {}
        l1: list[Candidate] = []
        for candidate in batch.candidates:
            layer = _layer(candidate, ctx)
            if layer is Layer.L0:
                reason = f"{candidate.diff.artifact_id!r} is in layer L0; L0 is frozen"
                verdicts[candidate.diff.id] = (candidate, verdict(candidate, Outcome.REFUSED, NAME, reason))
            elif layer is Layer.L1:
                l1.append(candidate)
        refused = len(verdicts)
        deferred = _serialize(l1, state.pending)
        verdicts.update(deferred)
        new_state = replace(state, refused=state.refused + refused, deferred=state.deferred + len(deferred))
        return batch.settle(verdicts), new_state

    def observe(decisions: Sequence[Decision], state: GovernanceState, ctx: Context) -> GovernanceState:
        pending = dict(state.pending)
        for decision in decisions:
            head = ctx.heads.get(decision.artifact_id)
            slot = pending.get(decision.artifact_id)
            if decision.outcome is Outcome.FULL_CHECK and head is not None and head.layer is Layer.L1:
                pending.setdefault(decision.artifact_id, decision.diff_id)
            elif decision.outcome.final and slot == decision.diff_id:
                del pending[decision.artifact_id]
        return replace(state, pending=pending)

    return Stage(NAME, GovernanceState, update, GovernanceState.load, observe)
