"""One change's replication evidence pooled across its proposals: an e-process over every context it was scored in.

A proposer often proposes one right change again (the same `core.diff.fingerprint`): a rule for a rare category
that fails its replication test by one unlucky context is proposed anew from the same origin task on a later head.
Each proposal's replication test (`optim.judge`) starts from nothing, its design fixed, and each failure lowers the
next one's level (`optim.acceptance`): a right override that won 6 of 8 fresh contexts, then 3 of 4 and 2 of 3 in
two more proposals, was turned down every time. Adding up those contexts in a binomial test is not valid: how many
a test took depends on its scores.

An e-process is. Per distinct replica row (an origin task scored in one context, its id naming both), with X = 1
for a full win (base 0, candidate 1) and q the replication test's noise bound,

    e = (P1 / q)^X ((1 − P1) / (1 − q))^(1 − X),

the likelihood ratio of a fixed alternative win rate `P1` to the null's q. Under the null (a full win with chance
at most q in every context, given the ones before) each factor has mean at most 1, so the product over the rows in
the order they came is a nonnegative supermartingale, and by Ville's inequality it ever reaches 1 / α with chance
at most α, however often it is looked at and however many proposals add rows to it. The same context scored twice
(one text, one cached answer) counts once.

A proposal is judged by this pooled test, instead of its own replication test, when the run already held replica
rows of its change, from other contexts, when it was judged with its first replica row, and they favour the change
(their e-process at least 1; where they do not, a fresh start of its own test needs fewer contexts, in simulation
and in the benchmark worlds): a choice made from earlier proposals only, so each proposal's test keeps its level
(the one its replication test would have had) and the union bound over proposals holds as before. The harm check is
its own, on its own rows. Like the replication test, its q is the bound at the look, raised by the origin tasks'
own pass rates in the pooled contexts (`judge.origin_bound`). A proposal in the pooled test gets at most as many
new contexts (ones its change was not scored in before it) as the replication test's two stages have, and only while
winning all of them could still pass.

Pure: the state comes in and goes out (`Replays`, kept by the acceptance stage).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from agentgrad.core._checks import is_integer
from agentgrad.core.diff import fingerprint
from agentgrad.core.evidence import Row, replica_origin
from agentgrad.errors import StateDictError
from agentgrad.optim.base import Candidate
from agentgrad.optim.judge import EXTRA_REPLICAS, REPLICAS, TIE, Judgement, RowTally, origin_bound
from agentgrad.optim.noise import NoiseEstimate

P1 = 0.7  # the alternative: a right change wins this share of the contexts its origin task is scored in
MOST_CHANGES = 2_000  # changes whose rows are kept (the oldest is forgotten first)
MOST_PROPOSALS = 10_000  # proposals whose test (pooled or their own) is remembered


@dataclass(frozen=True)
class Replays:
    """What the pooled test keeps: per change (fingerprint), its replica rows so far (row id -> (base,
    candidate)); per proposal (diff id) judged with replica rows, how many rows of its change were held from
    earlier proposals when the pooled test became its test (0: its own test is)."""

    rows: Mapping[str, Mapping[str, tuple[float, float]]] = field(default_factory=dict)
    pooled: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        rows = {fp: MappingProxyType(dict(seen)) for fp, seen in list(self.rows.items())[-MOST_CHANGES:]}
        object.__setattr__(self, "rows", MappingProxyType(rows))
        object.__setattr__(self, "pooled", MappingProxyType(dict(list(self.pooled.items())[-MOST_PROPOSALS:])))

    def rows_for(self, candidate: Candidate, noise: NoiseEstimate | None) -> tuple[list[Row], int] | None:
        """The rows the pooled test judges `candidate` on (its change's rows held before, and its own replica
        rows) and how many of them are new since its test began, or None when its own replication test is its
        test (`earlier`; or it has no replica row: a first look, or a fused change's pooled rows)."""
        evidence = candidate.evidence
        if not evidence.replicas or len({replica_origin(t) for t in evidence.replicas}) > 1:
            return None
        change = fingerprint(candidate.diff)
        start = self.earlier(candidate, change, noise)
        if not start:
            return None
        own = {r.task_id: r for r in evidence.replica_rows()}
        held = {t: Row(t, b, c) for t, (b, c) in self.rows.get(change, {}).items()}
        rows = list((held | own).values())
        return rows, len(rows) - start

    def seen(self, candidate: Candidate, noise: NoiseEstimate | None) -> Replays:
        """With `candidate`'s replica rows added to its change's and its test (pooled or its own) fixed."""
        evidence = candidate.evidence
        if not evidence.replicas or len({replica_origin(t) for t in evidence.replicas}) > 1:
            return self
        change = fingerprint(candidate.diff)
        mine = {r.task_id: (r.base, r.candidate) for r in evidence.replica_rows()}
        rows = {**self.rows, change: {**self.rows.get(change, {}), **mine}}
        pooled = {**self.pooled, candidate.diff.id: self.earlier(candidate, change, noise)}
        return replace(self, rows=rows, pooled=pooled)

    def earlier(self, candidate: Candidate, change: str, noise: NoiseEstimate | None) -> int:
        """How many rows its change had when the pooled test of `candidate` began, 0 when its own test is its
        test: fixed at its look with its first replica row, from the rows its change had then from other
        contexts (earlier proposals; one with the same id proposed anew decides afresh), and read back at its later
        looks; pooled when they favour the change (their e-process at least 1)."""
        own = set(candidate.evidence.replicas)
        if len(candidate.evidence.replicas) > 1 and candidate.diff.id in self.pooled:
            return self.pooled[candidate.diff.id]
        held = self.rows.get(change, {})
        earlier = [Row(t, b, c) for t, (b, c) in held.items() if t not in own]
        return len(held) if favours(earlier, noise) else 0

    def to_dict(self) -> dict[str, Any]:
        return {"rows": {fp: {t: list(pair) for t, pair in seen.items()} for fp, seen in self.rows.items()},
                "pooled": dict(self.pooled)}

    @classmethod
    def load(cls, data: Any) -> Replays:
        """Read `to_dict` output back, refusing anything malformed (`StateDictError`)."""
        if not isinstance(data, Mapping) or set(data) != {"rows", "pooled"}:
            raise StateDictError(f"accept: unexpected pooled replication state {data!r}")
        rows, pooled = data["rows"], data["pooled"]
        if not isinstance(rows, Mapping) or not isinstance(pooled, Mapping) or not all(
                is_integer(v, low=0) for v in pooled.values()):
            raise StateDictError("accept: pooled replication state needs 'rows' and 'pooled' mappings")
        return cls({str(fp): {str(t): _pair(p) for t, p in _mapping(seen).items()} for fp, seen in rows.items()},
                   {str(k): v for k, v in pooled.items()})


def _mapping(value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise StateDictError(f"accept: pooled replication rows must be a mapping, got {value!r}")
    return value


def _pair(value: Any) -> tuple[float, float]:
    if not (isinstance(value, list) and len(value) == 2 and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and 0.0 <= v <= 1.0 for v in value)):
        raise StateDictError(f"accept: a pooled replication row must be [base, candidate] in [0, 1], got {value!r}")
    return float(value[0]), float(value[1])


def full_win(row: Row) -> bool:
    """True for a replica row the change turned from a fail into a pass."""
    return row.base <= TIE and row.candidate >= 1.0 - TIE


def log_e(rows: list[Row], q: float) -> float:
    """The log of the e-process's value over `rows` at the noise bound q (module doc)."""
    wins = sum(full_win(r) for r in rows)
    return wins * math.log(P1 / q) + (len(rows) - wins) * math.log((1.0 - P1) / (1.0 - q))


def favours(rows: list[Row], noise: NoiseEstimate | None) -> bool:
    """True if replica `rows` (some) favour the change: their e-process at its noise bound is at least 1."""
    return bool(rows) and log_e(rows, origin_bound(noise, [r.base for r in rows])) >= 0.0


def judge_pooled(post: Judgement, rows: list[Row], *, alpha: float, noise: NoiseEstimate | None) -> Judgement:
    """`post` (the candidate's own replication test, for its harm check) judged instead by the pooled test on
    `rows` at level `alpha`: it passes when the e-process reaches 1 / α and the candidate does no harm."""
    q = origin_bound(noise, [r.base for r in rows])
    value = log_e(rows, q)
    p_value = 1.0 if value <= 0 else math.exp(-value)  # 1 / e: a valid p-value
    passes = value >= -math.log(alpha) and not post.harmful
    return replace(post, passes=passes, test="pooled", p_value=p_value, delta=alpha, gain=RowTally.of(rows),
                   noise_win=q, pooled=False, closed=None)


def may_go_on(rows: list[Row], *, own: int, alpha: float, noise: NoiseEstimate | None) -> bool:
    """True while a proposal in the pooled test (its `rows`, `own` of them new to its change) may have another
    context: fewer new ones than the replication test's two stages, and winning all that are left could still pass
    at `alpha`."""
    left = REPLICAS + EXTRA_REPLICAS - own
    q = origin_bound(noise, [r.base for r in rows])
    return left > 0 and log_e(rows, q) + left * math.log(P1 / q) >= -math.log(alpha)


__all__ = ["P1", "Replays", "favours", "full_win", "judge_pooled", "log_e", "may_go_on"]
