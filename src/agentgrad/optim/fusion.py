"""`fuse`: merge compatible diffs of one artifact into one, keeping only the parts that pull their weight.

Within a step, the diffs of one artifact that survived conflict resolution touch disjoint units and share a base
version. Leaving component c out of their union changes the result only by c's own effect, so c's own paired
evidence is its leave-one-out contribution. A component is kept only if that contribution is a significant
improvement (the same test as acceptance); the others are left out of the fusion, which stops junk riding along
with a good edit, and go on alone to the acceptance stage (which rejects them, or holds a promising one for more
evidence). Two or more kept components become one fused diff that the acceptance stage then tests as a whole.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from agentgrad.core._checks import integer
from agentgrad.core.decision import Decision, Outcome
from agentgrad.core.diff import Diff, apply
from agentgrad.core.evidence import concatenate
from agentgrad.errors import ApplyConflictError, StateDictError
from agentgrad.optim.acceptance import head_of, look_delta
from agentgrad.optim.base import Batch, Candidate, Context, Head, Stage, verdict
from agentgrad.optim.judge import judge
from agentgrad.optim.noise import NoiseEstimate
from agentgrad.optim.schedules import Schedule, delta_schedule
from agentgrad.optim.stats import SIGN_TEST_PRIOR, check_margin, check_prior

STAGE = "fuse"
_COUNTERS = ("groups_fused", "components_fused", "components_dropped")


@dataclass(frozen=True)
class FusionState:
    """How many groups were fused, how many components were fused into them, and how many were left out of them
    (`components_dropped`: not significant on their own, sent on alone)."""

    groups_fused: int = 0
    components_fused: int = 0
    components_dropped: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _COUNTERS}

    @classmethod
    def load(cls, data: Mapping[str, Any]) -> FusionState:
        """Read `to_dict` output back, refusing anything malformed (`StateDictError`)."""
        if not isinstance(data, Mapping) or set(data) - set(_COUNTERS):
            raise StateDictError(f"{STAGE}: unexpected state dict {data!r}")
        values = {name: data.get(name, 0) for name in _COUNTERS}
        for name, value in values.items():
            integer(value, f"{STAGE}: {name}", low=0, error=StateDictError)
        return cls(**values)


def fused_diff(parts: Sequence[Diff]) -> Diff:
    """One diff made of `parts` (same artifact and base): their ops in diff-id order, id "f" + a hash of the ids."""
    ordered = sorted(parts, key=lambda d: d.id)
    ids = [d.id for d in ordered]
    digest = hashlib.sha256(json.dumps(ids).encode()).hexdigest()
    return Diff(ordered[0].artifact_id, ordered[0].base_version, tuple(op for d in ordered for op in d.ops),
                author="fusion", rationale="; ".join(d.rationale for d in ordered if d.rationale),
                breaks_contract=any(d.breaks_contract for d in ordered), id="f" + digest[:15])


def _fused_candidate(kept: Sequence[Candidate], head: Head) -> Candidate | None:
    """The fused candidate of `kept`, or None if their union does not apply to the head text."""
    parts = sorted(kept, key=lambda c: c.diff.id)
    diff = fused_diff([c.diff for c in parts])
    try:
        apply(diff, head.text)
    except ApplyConflictError:
        return None
    evidence = concatenate([(c.diff.id, c.evidence) for c in parts])
    return Candidate(diff, evidence, parts=tuple(c.diff for c in parts), looks=max(c.looks for c in parts))


@dataclass(frozen=True)
class _GroupResult:
    verdicts: dict[str, tuple[Candidate, Decision]]
    survivors: tuple[Candidate, ...]
    left_out: int = 0


def _fuse_group(group: Sequence[Candidate], head: Head, risk: Callable[[int], float], margin: float,
                prior: tuple[float, float], noise: NoiseEstimate | None) -> _GroupResult:
    """Test each component of one artifact's group by leave-one-out (at the δ of its look, `risk`); fuse the kept
    ones if two or more and their fusion passes the same test (else nothing is fused)."""
    verdicts: dict[str, tuple[Candidate, Decision]] = {}
    kept: list[tuple[Candidate, dict[str, float]]] = []
    alone: list[Candidate] = []  # not significant on their own: not fused, judged alone by acceptance
    for candidate in group:
        post = judge(candidate.evidence, delta=risk(candidate.looks), margin=margin, noise=noise, prior=prior,
                     closing=candidate.closing)  # a closing look is judged as the acceptance stage will
        if post.passes:
            kept.append((candidate, post.numbers()))
        else:
            alone.append(candidate)
    fused = _fused_candidate([c for c, _ in kept], head) if len(kept) >= 2 else None
    if fused is not None and not judge(fused.evidence, delta=risk(fused.looks), margin=margin, noise=noise,
                                       prior=prior).passes:
        fused = None  # the union would not be committed: the components go on alone
    if fused is None:
        return _GroupResult(verdicts, tuple(c for c in group))
    for candidate, numbers in kept:
        verdicts[candidate.diff.id] = (candidate, verdict(
            candidate, Outcome.FUSED, STAGE, f"fused into {fused.diff.id} with {len(kept) - 1} other diff(s)",
            numbers))
    return _GroupResult(verdicts, (fused, *alone), len(alone))


def _groups(candidates: Sequence[Candidate]) -> dict[str, list[Candidate]]:
    """The candidates open to fusion (not awaiting a re-check), by artifact, in batch order."""
    groups: dict[str, list[Candidate]] = {}
    for candidate in candidates:
        if not candidate.recheck:
            groups.setdefault(candidate.diff.artifact_id, []).append(candidate)
    return groups


def _fusable(group: Sequence[Candidate], head: Head) -> bool:
    return len(group) >= 2 and all(c.diff.base_version == head.version for c in group)


def fuse(*, delta: float | Schedule = 0.05, margin: float = 0.02, prior: tuple[float, float] = SIGN_TEST_PRIOR,
         looks: int = 1, first_share: float = 0.7) -> Stage[FusionState]:
    """The fusion stage, named "fuse".

    Args:
        delta: the risk δ in (0, 0.5) of the per-component test, or a `Schedule` of it by head version.
        margin: the minimum improvement per differing pair a component must show, in [0, 1).
        prior: the Beta prior (a0, b0) of the win rate, a0 <= b0.
        looks, first_share: as for `accept_if`: each component is tested at the δ of its look.
    Candidates awaiting a re-check, lone diffs of an artifact, and groups not all based on the head version pass
    through untouched; a group whose union does not apply to the head passes through unfused (minus the drops).
    State: `FusionState` counters.
    """
    schedule, margin, prior = delta_schedule(delta), check_margin(margin), check_prior(prior)

    def update(batch: Batch, state: FusionState, ctx: Context) -> tuple[Batch, FusionState]:
        verdicts: dict[str, tuple[Candidate, Decision]] = {}
        replacement: dict[str, tuple[Candidate, ...]] = {}  # first member's id -> what stands for the group
        groups_fused = left_out = 0
        for aid, group in _groups(batch.candidates).items():
            head = head_of(ctx, aid, STAGE)
            if not _fusable(group, head):
                continue
            result = _fuse_group(group, head, partial(look_delta, schedule(head.version), looks=looks,
                                                      first_share=first_share), margin, prior, ctx.noise)
            verdicts.update(result.verdicts)
            replacement.update({c.diff.id: () for c in group})
            replacement[group[0].diff.id] = result.survivors
            groups_fused += any(d.outcome is Outcome.FUSED for _, d in result.verdicts.values())
            left_out += result.left_out
        keep = [s for c in batch.candidates for s in replacement.get(c.diff.id, (c,))]
        ordered = {c.diff.id: verdicts[c.diff.id] for c in batch.candidates if c.diff.id in verdicts}
        outcomes = [d.outcome for _, d in ordered.values()]
        new_state = FusionState(state.groups_fused + groups_fused,
                                state.components_fused + outcomes.count(Outcome.FUSED),
                                state.components_dropped + left_out)
        return batch.settle(ordered, keep=keep), new_state

    return Stage(STAGE, FusionState, update, FusionState.load)
