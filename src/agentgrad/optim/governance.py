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
        routes: for a library diff that edits an L1 member and was let through, that member (the slot it takes).
    """

    pending: Mapping[str, str] = field(default_factory=dict)
    refused: int = 0
    deferred: int = 0
    routes: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "pending", MappingProxyType(dict(self.pending)))
        object.__setattr__(self, "routes", MappingProxyType(dict(self.routes)))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; `GovernanceState.load` reverses it."""
        return {"pending": dict(sorted(self.pending.items())), "refused": self.refused, "deferred": self.deferred,
                "routes": dict(sorted(self.routes.items()))}

    @classmethod
    def load(cls, data: Mapping[str, Any]) -> GovernanceState:
        """Rebuild a state from `to_dict` output; raises `StateDictError` on anything malformed."""
        pending = data.get("pending", {})
        if not isinstance(pending, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) and v for k, v in pending.items()):
            raise StateDictError(f"{NAME}: 'pending' must map artifact ids to diff ids, got {pending!r}")
        routes = data.get("routes", {})
        if not isinstance(routes, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) and v for k, v in routes.items()):
            raise StateDictError(f"{NAME}: 'routes' must map diff ids to artifact ids, got {routes!r}")
        counts = {name: data.get(name, 0) for name in ("refused", "deferred")}
        for name, value in counts.items():
            integer(value, f"{NAME}: counter {name!r}", low=0, error=StateDictError)
        return cls(pending, routes=routes, **counts)


_STRICTNESS = {Layer.L0: 0, Layer.L1: 1, Layer.L2: 2}


def _touched(candidate: Candidate, ctx: Context) -> dict[str, Layer]:
    """The layers of what the candidate edits: its artifact, or the library members its ops name."""
    diff = candidate.diff
    ids = sorted(diff.members()) or [diff.artifact_id]
    layers = {}
    for artifact_id in ids:
        head = ctx.heads.get(artifact_id)
        if head is None:
            raise UnknownArtifactError(f"{NAME}: diff {diff.id} edits unknown artifact {artifact_id!r}")
        layers[artifact_id] = head.layer
    return layers


def _layer(candidate: Candidate, ctx: Context) -> tuple[Layer, str]:
    """The strictest layer the candidate touches, and the artifact that has it."""
    layers = _touched(candidate, ctx)
    artifact_id = min(layers, key=lambda a: (_STRICTNESS[layers[a]], a))
    return layers[artifact_id], artifact_id


def _best_first(candidate: Candidate) -> tuple[float, str]:
    return -candidate.evidence.mean_delta(), candidate.diff.id


def _serialize(l1: Mapping[str, Candidate], slots: Mapping[str, str],
               pending: Mapping[str, str]) -> dict[str, tuple[Candidate, Decision]]:
    """DEFERRED verdicts for the L1 candidates that must wait: one per artifact goes on, the pending one if set.

    `l1` maps diff ids to candidates and `slots` diff ids to the L1 artifact each would take."""
    verdicts: dict[str, tuple[Candidate, Decision]] = {}
    for artifact_id in sorted(set(slots.values())):
        group = sorted((c for d, c in l1.items() if slots[d] == artifact_id), key=_best_first)
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
        l1: dict[str, Candidate] = {}
        slots: dict[str, str] = {}
        for candidate in batch.candidates:
            layer, artifact_id = _layer(candidate, ctx)
            if layer is Layer.L0:
                reason = f"{artifact_id!r} is in layer L0; L0 is frozen"
                verdicts[candidate.diff.id] = (candidate, verdict(candidate, Outcome.REFUSED, NAME, reason))
            elif layer is Layer.L1:
                l1[candidate.diff.id], slots[candidate.diff.id] = candidate, artifact_id
        refused = len(verdicts)
        deferred = _serialize(l1, slots, state.pending)
        verdicts.update(deferred)
        routes = {**state.routes, **{d: a for d, a in slots.items()
                                     if d not in deferred and a != l1[d].diff.artifact_id}}
        new_state = replace(state, refused=state.refused + refused, deferred=state.deferred + len(deferred),
                            routes=routes)
        return batch.settle(verdicts), new_state

    def observe(decisions: Sequence[Decision], state: GovernanceState, ctx: Context) -> GovernanceState:
        pending, routes = dict(state.pending), dict(state.routes)
        for decision in decisions:
            artifact_id = routes.get(decision.diff_id, decision.artifact_id)  # a library diff: its L1 member
            head = ctx.heads.get(artifact_id)
            slot = pending.get(artifact_id)
            if decision.outcome is Outcome.FULL_CHECK and head is not None and head.layer is Layer.L1:
                pending.setdefault(artifact_id, decision.diff_id)
            elif decision.outcome.final:
                routes.pop(decision.diff_id, None)
                if slot == decision.diff_id:
                    del pending[artifact_id]
        return replace(state, pending=pending, routes=routes)

    return Stage(NAME, GovernanceState, update, GovernanceState.load, observe)
