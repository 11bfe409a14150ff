"""`resolve_conflicts`: among diffs of one artifact, keep one of each clashing pair, the better on shared examples.

Two candidates clash syntactically when they touch the same unit (a rule, a keyed entry, a section, the whole
text): two values for one key, or an add and a delete of one rule. They clash semantically when a strategy's
`contradicts(op_a, op_b)` says some pair of their ops contradict (a rule and its negation). A better score alone
cannot catch that: a wrong rule for a category with no rule yet does not lower the score, and it blocks the right
one later. Diffs with the same fingerprint make the same change: one is kept, the others are duplicates.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import groupby

from agentgrad.core.decision import Decision, Outcome
from agentgrad.core.diff import fingerprint
from agentgrad.core.ops import Op
from agentgrad.errors import ConfigError
from agentgrad.optim.base import Batch, Candidate, Context, EmptyState, Stage, stateless, verdict

NAME = "conflicts"
Contradicts = Callable[[Op, Op], bool]


def _rank_key(candidate: Candidate) -> tuple[float, int, str, tuple[tuple[str, float, float], ...]]:
    """Best first: own mean delta desc, evidence rows desc, diff id asc (then the rows, for a total order)."""
    evidence = candidate.evidence
    rows = tuple(sorted((r.task_id, r.base, r.candidate) for r in evidence.rows))
    return -_mean(candidate, sorted(evidence.task_ids)), -len(evidence.rows), candidate.diff.id, rows


def _mean(candidate: Candidate, task_ids: Sequence[str]) -> float:
    """Mean delta of `candidate` over `task_ids`, summed in the given order (0.0 for none)."""
    deltas = candidate.evidence.deltas()
    return sum(deltas[t] for t in task_ids) / len(task_ids) if task_ids else 0.0


@dataclass(frozen=True)
class Match:
    """How two clashing candidates compare: their mean deltas, on the `shared` tasks or (too few) on their own."""

    first_mean: float
    second_mean: float
    shared: int
    on_shared: bool


def compare(first: Candidate, second: Candidate, min_shared: int) -> Match:
    """Mean deltas of both on the tasks both evidences cover when there are at least `min_shared`, else their own."""
    shared = sorted(set(first.evidence.task_ids) & set(second.evidence.task_ids))
    if len(shared) >= min_shared:
        return Match(_mean(first, shared), _mean(second, shared), len(shared), True)
    own = (_mean(first, sorted(first.evidence.task_ids)), _mean(second, sorted(second.evidence.task_ids)))
    return Match(own[0], own[1], len(shared), False)


def beats(first: Candidate, second: Candidate, min_shared: int) -> bool:
    """True if `first` wins against `second`: higher mean delta (see `compare`), then more rows, then smaller id."""
    match = compare(first, second, min_shared)
    if match.first_mean != match.second_mean:
        return match.first_mean > match.second_mean
    return _rank_key(first)[1:] < _rank_key(second)[1:]


def clash(first: Candidate, second: Candidate, contradicts: Contradicts | None) -> str | None:
    """Why two candidates of one artifact cannot both go in, or None if they can."""
    shared = sorted(first.diff.keys() & second.diff.keys())
    if shared:
        units = ", ".join(f"{scope} {key!r}" for scope, key in shared[:3])
        return f"both edit {units}"
    if contradicts is not None:
        for a in first.diff.ops:
            for b in second.diff.ops:
                if contradicts(a, b) or contradicts(b, a):
                    return f"{a.scope.value} {a.key!r} contradicts {b.scope.value} {b.key!r}"
    return None


def _lose(loser: Candidate, winner: Candidate, why: str, min_shared: int) -> Decision:
    match = compare(loser, winner, min_shared)
    where = f"{match.shared} shared example(s)" if match.on_shared else "their own examples"
    reason = (f"conflicts with {winner.diff.id} ({why}); {winner.diff.id} is better on {where}: mean delta "
              f"{match.second_mean:+.4f} against {match.first_mean:+.4f}")
    numbers = {"mean_delta": match.first_mean, "winner_mean_delta": match.second_mean, "shared": float(match.shared),
               "on_shared": float(match.on_shared)}
    return verdict(loser, Outcome.CONFLICT, NAME, reason, numbers)


def _drop_duplicates(ranked: Sequence[Candidate]) -> tuple[list[Candidate], dict[str, Decision]]:
    """Keep the best-ranked of each fingerprint; the others are duplicates of it."""
    kept: dict[str, Candidate] = {}
    decisions: dict[str, Decision] = {}
    for candidate in ranked:
        first = kept.setdefault(fingerprint(candidate.diff), candidate)
        if first is not candidate:
            reason = f"makes the same change as {first.diff.id}, which ranks higher"
            decisions[candidate.diff.id] = verdict(candidate, Outcome.DUPLICATE, NAME, reason)
    return list(kept.values()), decisions


def _resolve(ranked: Sequence[Candidate], contradicts: Contradicts | None, min_shared: int) -> dict[str, Decision]:
    """Walk the ranking: keep a candidate unless a kept one it clashes with beats it; if it beats them, they go."""
    kept: list[Candidate] = []
    decisions: dict[str, Decision] = {}
    for candidate in ranked:
        rivals = [(k, why) for k in kept if (why := clash(candidate, k, contradicts)) is not None]
        winner = next(((k, why) for k, why in rivals if beats(k, candidate, min_shared)), None)
        if winner is not None:
            decisions[candidate.diff.id] = _lose(candidate, winner[0], winner[1], min_shared)
            continue
        for rival, why in rivals:
            decisions[rival.diff.id] = _lose(rival, candidate, why, min_shared)
            kept.remove(rival)
        kept.append(candidate)
    return decisions


def resolve_conflicts(*, contradicts: Contradicts | None = None, min_shared: int = 1) -> Stage[EmptyState]:
    """A stage that drops duplicates and keeps the better of each clashing pair of candidates of one artifact.

    Candidates are ranked by own mean delta (desc), evidence rows (desc) and diff id; the ranking is walked and a
    candidate is kept unless it loses to a kept candidate it clashes with; when it beats every kept candidate it
    clashes with, those lose to it (they are not revisited). A pair is compared on the tasks both evidences cover
    when they share at least `min_shared`, else on each one's own mean delta. The result does not depend on the
    order of the batch; decisions come sorted by artifact and rank.

    Args:
        contradicts: optional `contradicts(op_a, op_b)` for semantic clashes; it is asked both ways round.
        min_shared: fewest shared tasks for a comparison on shared examples.
    Keeps no state.
    """
    if min_shared < 1:
        raise ConfigError(f"{NAME}: min_shared must be >= 1, got {min_shared}")

    def update(batch: Batch, ctx: Context) -> Batch:
        ranked = sorted(batch.candidates, key=lambda c: (c.diff.artifact_id, _rank_key(c)))
        decisions: dict[str, Decision] = {}
        for _, group in groupby(ranked, key=lambda c: c.diff.artifact_id):
            unique, duplicates = _drop_duplicates(list(group))
            decisions.update(duplicates)
            decisions.update(_resolve(unique, contradicts, min_shared))
        return batch.settle({c.diff.id: (c, decisions[c.diff.id]) for c in ranked if c.diff.id in decisions})

    return stateless(NAME, update)
