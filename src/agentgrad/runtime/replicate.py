"""Replication: a candidate held for the replication test (`optim.judge`) gets its origin task scored again in
fresh contexts (`runtime.parking`), where a change with no effect wins only by noise.

`replicate` scores one context: the origin task there with and without the change, plus the earlier rows the
commits since its evidence touched (so the no-harm check sees the head); every other row is carried over.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from agentgrad.core.artifact import Version, content_hash
from agentgrad.core.diff import Diff, apply
from agentgrad.core.evidence import Evidence
from agentgrad.core.rebase import rebase
from agentgrad.optim.base import Candidate
from agentgrad.runtime.engine import Engine
from agentgrad.runtime.parking import Context, Earlier, context_key, replica_id, used_contexts
from agentgrad.runtime.promote import inverse_on_dev
from agentgrad.runtime.records import Proposed, Snapshot

MIN_ROWS = 8  # a replication tops its evidence up to this many rows besides the replicas (the no-harm check)


def applied_on(diff: Diff, text: str) -> str | None:
    """`text` with `diff`'s change re-anchored on it; None if it conflicts or `text` already has it."""
    moved = rebase(diff, text, diff.base_version + 1)  # the version number is not kept: only the text is
    return apply(moved, text) if isinstance(moved, Diff) and moved.ops else None


class HeadWith:
    """A text with a sibling's change applied (`applied_on`), made once per sibling: a release asks twice, whether
    the sibling keeps the head whole and whether the context is fresh."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._made: dict[str, str | None] = {}

    def __call__(self, sibling: Diff) -> str | None:
        if sibling.id not in self._made:
            self._made[sibling.id] = applied_on(sibling, self.text)
        return self._made[sibling.id]


def context_of(head: Snapshot, sibling: Context | None, head_with: HeadWith | None = None) -> str | None:
    """The text of a context: the head, the head with `sibling`'s change (None if that does not apply; made by
    `head_with` when given), or a whole earlier text (a last-resort context, `runtime.parking`)."""
    if isinstance(sibling, Earlier):
        return sibling.text
    if sibling is None:
        return head.text
    return applied_on(sibling, head.text) if head_with is None else head_with(sibling)


def combined(version: Earlier, sibling: Diff) -> Earlier | None:
    """The earlier version with `sibling`'s change applied (a last-resort context, `runtime.parking`); None if it
    does not apply there."""
    text = applied_on(sibling, version.text) if version.via is None else None
    return None if text is None else replace(version, text=text, via=sibling.id)


def without_commits(engine: Engine, history: Sequence[Version], most: int) -> list[Earlier]:
    """Last-resort contexts (`runtime.parking`): the head (the last of `history`) with one earlier commit's change
    taken out, the oldest commit first, at most `most`, each with the tasks the commit was proposed from (empty when
    not known); not the latest commit (the head without it is the version before, an earlier context already), nor
    one whose inverse does not rebase onto the head (`inverse_on_dev`)."""
    if len(history) < 3:
        return []
    head, out = history[-1], list[Earlier]()
    for version in history[1:-1]:
        made = inverse_on_dev(engine, version.number, head)
        if made is not None:
            entry = engine.watch.lineage.get(content_hash(version.text))
            out.append(Earlier(head.number, apply(made[1], head.text), without=version.number,
                               taken=() if entry is None else entry[2]))
        if len(out) >= most:
            break
    return out


def keeps_whole(head_with: HeadWith, sibling: Diff) -> bool:
    """True if the text of `head_with` with `sibling`'s change still has every line of it (the change only adds): a
    context where a change that builds on the head's rules still finds them (`runtime.parking`). False if it does
    not apply."""
    text, changed = head_with.text, head_with(sibling)
    return changed is not None and not Counter(text.splitlines()) - Counter(changed.splitlines())


def is_fresh(engine: Engine, candidate: Candidate, sibling: Context | None = None,
             head_with: HeadWith | None = None) -> bool:
    """True if the context (the head, the head with `sibling`, or the earlier context `sibling`) is one
    `candidate` was never scored in (not the head its evidence was gathered on, nor one of its replicas', nor the
    version it was proposed on) and its change applies there; a head without a commit only if that commit was for
    tasks far from the candidate's origin. `head_with`: the head's texts with siblings, shared
    by the calls of one release."""
    text = context_of(engine.head, sibling, head_with)
    if text is None or applied_on(candidate.diff, text) is None:
        return False  # no such context, or the change does not apply there (or it already has it)
    if isinstance(sibling, Earlier) and sibling.without is not None and not _apart(engine, candidate, sibling):
        return False  # the change might win there by standing in for the commit taken out
    born = engine.open.born(candidate.diff.id)
    if isinstance(sibling, Earlier) and sibling.via is None and sibling.without is None and (
            born is None or sibling.version == born):
        return False  # the version it was proposed on, picked there for failing (or that version is not known)
    seen = used_contexts(candidate)
    version = candidate.evidence.base_version
    if version is not None:
        where = (candidate.diff.artifact_id, version)
        keys = engine.parking.base_keys
        if where not in keys:  # a version's text never changes: read it from the store once
            keys[where] = context_key(engine.store.version(*where).text)
        seen.add(keys[where])
    return context_key(text) not in seen


def _apart(engine: Engine, candidate: Candidate, context: Earlier) -> bool:
    """True if the commit `context` takes out was proposed from tasks (known) each far from `candidate`'s origin."""
    origin = candidate.origin
    return origin is not None and bool(context.taken) and all(engine.watch.far(t, [origin]) for t in context.taken)


def _harm_rows(engine: Engine, base: Snapshot, candidate: Candidate, have: set[str]) -> list[str]:
    """Plan tasks to score so that the evidence has `MIN_ROWS` rows besides its replicas."""
    if len(have) >= MIN_ROWS:
        return []
    focus, rest = engine.gate.plan(base.text, base.version, candidate.origin)
    return [t for t in [*focus, *rest] if t not in have][: MIN_ROWS - len(have)]


async def replicate(engine: Engine, proposed: Proposed, candidate: Candidate,
                    touched: frozenset[str] | None) -> Candidate | None:
    """The candidate with one more replica row, its other rows on `proposed`'s snapshot (the head), or None (parked
    again) when there is no fresh context for it now; for a `closing` candidate (its last look), no new replica.
    `touched`: the tasks the commits since its evidence changed (None: unknown, so every earlier row is scored
    again)."""
    diff, base, origin = proposed.diff, proposed.snapshot, candidate.origin
    if candidate.closing:
        return _updated(proposed, candidate, await _rows_scored(engine, proposed, candidate, touched), None)
    sibling = engine.parking.siblings.pop(diff.id, None)
    context = context_of(base, sibling)
    cand_context = None if context is None else applied_on(diff, context)
    if origin is None or context is None or cand_context is None or not is_fresh(engine, candidate, sibling):
        engine.parking.park(candidate)
        return None
    scores = await _rows_scored(engine, proposed, candidate, touched)
    replica = replica_id(origin, context)
    scores[replica] = (await engine.gate.score_pairs((context, cand_context), [origin]))[origin]
    engine.journal.counts["replications"] += 1
    engine.journal.counts["sibling_replications"] += sibling is not None
    return _updated(proposed, candidate, scores, replica)


async def _rows_scored(engine: Engine, proposed: Proposed, candidate: Candidate,
                       touched: frozenset[str] | None) -> dict[str, tuple[float, float]]:
    """The (base, candidate) scores on `proposed`'s snapshot of the candidate's ordinary rows the commits since
    changed (`touched`; None: all), and of new tasks that top them up to `MIN_ROWS`."""
    diff, base, old = proposed.diff, proposed.snapshot, candidate.evidence
    marked = set(old.replicas)
    plain = {r.task_id for r in old.rows if r.task_id not in marked}
    redo = [t for t in plain if touched is None or t in touched] + _harm_rows(engine, base, candidate, plain)
    return await engine.gate.score_pairs((base.text, apply(diff, base.text)), redo) if redo else {}


def _updated(proposed: Proposed, candidate: Candidate, scores: dict[str, tuple[float, float]],
             replica: str | None) -> Candidate:
    """The candidate with `scores` over its rows, on `proposed`'s snapshot, and `replica` (its id) a new replica."""
    old = candidate.evidence
    pairs = {r.task_id: (r.base, r.candidate) for r in old.rows} | scores
    evidence = Evidence.paired({t: b for t, (b, _) in pairs.items()}, {t: c for t, (_, c) in pairs.items()},
                               base_version=proposed.snapshot.version, full=old.full, focus=old.focus, far=old.far,
                               calibrated=old.calibrated,
                               replicas=old.replicas if replica is None else (*old.replicas, replica))
    looks = candidate.looks + (0 if old.replicas else 1)
    return Candidate(proposed.diff, evidence, looks=looks, origin=candidate.origin, replicate=True,
                     shows_origin=candidate.shows_origin, closing=candidate.closing)


__all__ = ["MIN_ROWS", "HeadWith", "applied_on", "combined", "context_of", "is_fresh", "keeps_whole",
           "replicate"]
