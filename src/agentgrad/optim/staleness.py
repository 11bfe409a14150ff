"""`drop_stale`: admit diffs made against older heads only while their lag is small, rebasing them onto the head.

A diff's lag is η = head.version − diff.base_version. The tolerated lag α shrinks as an artifact gets hot: every
commit that lands between a diff's base and the head is a chance of semantic interference, and a rebased diff's
cheap re-check is wasted more often. The heat is an exponentially decayed commit rate (commits per second) per
artifact, learned in `observe` from ACCEPTED decisions at `ctx.now`. In a library run both are each member's: a
diff's lag counts only the versions that changed a member it edits (`lag_of`), and its tolerated lag follows the
hottest member it edits.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from agentgrad.core._checks import integer, is_number
from agentgrad.core.decision import Decision, Outcome
from agentgrad.core.diff import Diff, apply
from agentgrad.core.rebase import Conflict, rebase
from agentgrad.errors import ApplyConflictError, ConfigError, StateDictError
from agentgrad.optim.base import Batch, Candidate, Context, Head, Stage, head_of_diff, verdict

NAME = "staleness"
_COUNTERS = ("passed", "rebased", "rejected", "duplicate", "stale")


@dataclass(frozen=True)
class StalenessState:
    """What `drop_stale` keeps.

    Args:
        heat: per artifact, (commit rate in commits per second, the `ctx.now` it was last updated at).
        passed, rebased, rejected, duplicate, stale: how many candidates got each treatment so far.
        routes: for a library diff let through, the members it edits (their heat grows when it is accepted).
    """

    heat: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    passed: int = 0
    rebased: int = 0
    rejected: int = 0
    duplicate: int = 0
    stale: int = 0
    routes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "heat", MappingProxyType(dict(self.heat)))
        object.__setattr__(self, "routes", MappingProxyType({k: tuple(v) for k, v in self.routes.items()}))

    def rate_at(self, artifact_id: str, now: float, decay: float) -> float:
        """The commit rate of `artifact_id` decayed to time `now` (0.0 for an artifact never committed)."""
        rate, last = self.heat.get(artifact_id, (0.0, now))
        return _decayed(rate, last, now, decay)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; `StalenessState.load` reverses it."""
        heat = {aid: [rate, last] for aid, (rate, last) in sorted(self.heat.items())}
        return {"heat": heat, **{name: getattr(self, name) for name in _COUNTERS},
                "routes": {k: list(v) for k, v in sorted(self.routes.items())}}

    @classmethod
    def load(cls, data: Mapping[str, Any]) -> StalenessState:
        """Rebuild a state from `to_dict` output; raises `StateDictError` on anything malformed."""
        heat_in = data.get("heat", {})
        if not isinstance(heat_in, Mapping):
            raise StateDictError(f"{NAME}: 'heat' must be a dict, got {type(heat_in).__name__}")
        heat: dict[str, tuple[float, float]] = {}
        for aid, pair in heat_in.items():
            if not (isinstance(pair, (list, tuple)) and len(pair) == 2
                    and all(is_number(x, finite=False) for x in pair)):
                raise StateDictError(f"{NAME}: heat of {aid!r} must be [rate, last_time], got {pair!r}")
            if not (is_number(pair[0], low=0.0) and is_number(pair[1])):
                raise StateDictError(f"{NAME}: heat of {aid!r} must be finite with rate >= 0, got {pair!r}")
            heat[str(aid)] = (float(pair[0]), float(pair[1]))
        counters = {name: data.get(name, 0) for name in _COUNTERS}
        for name, value in counters.items():
            integer(value, f"{NAME}: counter {name!r}", low=0, error=StateDictError)
        routes = data.get("routes", {})
        if not isinstance(routes, Mapping) or not all(
                isinstance(k, str) and isinstance(v, list) and all(isinstance(m, str) for m in v)
                for k, v in routes.items()):
            raise StateDictError(f"{NAME}: 'routes' must map diff ids to lists of member ids, got {routes!r}")
        return cls(heat, routes={k: tuple(v) for k, v in routes.items()}, **counters)


def _decayed(rate: float, last: float, now: float, decay: float) -> float:
    """`rate` as of time `last`, decayed to `now` with time constant `decay` (no growth if `now` < `last`)."""
    return rate * math.exp(-max(0.0, now - last) / decay)


_SLACK = 1e-9  # rounding slack, so a rate decayed to next to nothing counts as cold


def alpha_for(rate: float, *, alpha_max: int, alpha_min: int, half_rate: float) -> int:
    """The tolerated lag at commit rate `rate`: max(alpha_min, floor(alpha_max · half_rate / (half_rate + rate))).

    The floor forgives a rounding slack of 1e-9, so an artifact whose rate has decayed to almost nothing gets
    `alpha_max` back (an exponential never reaches zero).
    """
    return max(alpha_min, math.floor(alpha_max * half_rate / (half_rate + rate) + _SLACK))


def _head(candidate: Candidate, ctx: Context) -> Head:
    return head_of_diff(candidate.diff, ctx, stage=NAME)


def lag_of(diff: Diff, head: Head) -> int:
    """How many versions behind `head` the diff is: for a library diff, only the versions that changed a member it
    edits count, when `head.changes` knows every version in between (else every version counts)."""
    lag = head.version - diff.base_version
    members = diff.members()
    between = range(diff.base_version + 1, head.version + 1)
    if lag <= 0 or not members or any(v not in head.changes for v in between):
        return lag
    return sum(1 for v in between if head.changes[v] & members)


def move_to_head(diff: Diff, head_text: str, head_version: int, alpha: int | None, *,
                 lag: int | None = None) -> Diff | tuple[Outcome, str]:
    """The staleness rule, the one place it is decided (the runtime applies it before the gate, this stage in a
    step): a diff made `lag` versions behind the head is rebased onto it while `lag <= alpha` (None: any lag; a
    contract-breaking diff is never rebased), and the moved diff returned; else (STALE, why) when it is too old or
    its rebase conflicts, or (DUPLICATE, why) when the head already has its effect. A diff on the head itself is
    returned as it is. `lag` defaults to the versions between; a library run passes `lag_of` (only the versions
    that changed a member the diff edits)."""
    if head_version <= diff.base_version:
        return diff
    lag = head_version - diff.base_version if lag is None else lag
    if diff.breaks_contract or (alpha is not None and lag > alpha):
        reason = f"lag {lag} exceeds the tolerated lag {0 if diff.breaks_contract else alpha} of {diff.artifact_id!r}"
        if diff.breaks_contract:
            reason += " (a contract-breaking diff is never rebased)"
        return Outcome.STALE, reason
    moved = rebase(diff, head_text, head_version)
    if isinstance(moved, Conflict):
        return Outcome.STALE, f"cannot rebase: {moved.reason}"
    if not moved.ops:
        return Outcome.DUPLICATE, f"head version {head_version} already has the effect of this diff"
    return moved


def _judge(candidate: Candidate, head: Head, alpha: int,
           numbers: Mapping[str, float]) -> tuple[str, Candidate | Decision]:
    """The treatment of one candidate (a counter name) and its replacement candidate or its decision."""
    diff = candidate.diff
    if head.version == diff.base_version:
        try:
            apply(diff, head.text)
        except ApplyConflictError as exc:
            return "rejected", verdict(candidate, Outcome.REJECTED, NAME, f"does not apply to head: {exc}", numbers)
        return "passed", candidate
    moved = move_to_head(diff, head.text, head.version, alpha, lag=lag_of(diff, head))
    if isinstance(moved, Diff):
        return "rebased", replace(candidate, diff=moved, recheck=True)
    outcome, reason = moved
    return outcome.value, verdict(candidate, outcome, NAME, reason, numbers)


def drop_stale(*, alpha_max: int = 4, alpha_min: int = 0, half_rate: float = 1.0,
               decay: float = 60.0) -> Stage[StalenessState]:
    """A stage that passes fresh diffs, rebases slightly stale ones (marked `recheck`) and drops the rest.

    Args:
        alpha_max: lag tolerated on a cold artifact.
        alpha_min: lag tolerated however hot the artifact is (a contract-breaking diff always gets 0).
        half_rate: the commit rate (commits per second) at which the tolerated lag is half of `alpha_max`.
        decay: time constant, in seconds of `ctx.now`, of the decayed commit rate.
    State: `StalenessState` (per-artifact commit rate and counters). Every decision carries lag, alpha and rate.
    """
    if not 0 <= alpha_min <= alpha_max:
        raise ConfigError(f"{NAME}: need 0 <= alpha_min <= alpha_max, got alpha_min={alpha_min}, alpha_max={alpha_max}")
    if not (math.isfinite(half_rate) and half_rate > 0 and math.isfinite(decay) and decay > 0):
        raise ConfigError(f"{NAME}: half_rate and decay must be finite and > 0, got {half_rate!r}, {decay!r}")

    def update(batch: Batch, state: StalenessState, ctx: Context) -> tuple[Batch, StalenessState]:
        verdicts: dict[str, tuple[Candidate, Decision]] = {}
        keep: list[Candidate] = []
        counts = {name: getattr(state, name) for name in _COUNTERS}
        routes = dict(state.routes)
        for candidate in batch.candidates:
            head = _head(candidate, ctx)
            members = sorted(candidate.diff.members())
            rate = max(state.rate_at(a, ctx.now, decay) for a in members or [candidate.diff.artifact_id])
            alpha = 0 if candidate.diff.breaks_contract else alpha_for(
                rate, alpha_max=alpha_max, alpha_min=alpha_min, half_rate=half_rate)
            numbers = {"lag": float(lag_of(candidate.diff, head)), "alpha": float(alpha), "rate": rate}
            kind, result = _judge(candidate, head, alpha, numbers)
            counts[kind] += 1
            if isinstance(result, Decision):
                verdicts[candidate.diff.id] = (candidate, result)
            else:
                keep.append(result)
                if members:
                    routes[candidate.diff.id] = tuple(members)
        return batch.settle(verdicts, keep=keep), replace(state, routes=routes, **counts)

    def observe(decisions: Sequence[Decision], state: StalenessState, ctx: Context) -> StalenessState:
        heat, routes = dict(state.heat), dict(state.routes)
        for decision in decisions:
            touched = routes.pop(decision.diff_id, ()) if decision.outcome.final else ()
            if decision.outcome is Outcome.ACCEPTED:
                for artifact_id in (decision.artifact_id, *touched):
                    rate, last = heat.get(artifact_id, (0.0, ctx.now))
                    heat[artifact_id] = (_decayed(rate, last, ctx.now, decay) + 1.0 / decay, max(last, ctx.now))
        return replace(state, heat=heat, routes=routes)

    return Stage(NAME, StalenessState, update, StalenessState.load, observe)
