"""One optimizer step, committed: the run's commit path (the only place a run writes versions).

`aggregate` logs the step's inputs (for resume and replay), runs the aggregator on the candidates, commits what it
accepted (`store.commit.commit_step`, compare-and-swap on the head), and logs the verdicts, the commits and the
work it held in the same transaction as the checkpoint that follows (`finish_step`). Both runtimes call it: the
synchronous one once a round, the asynchronous aggregator task whenever candidates are ready.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentgrad.core.artifact import Version, content_hash
from agentgrad.optim.aggregator import StepResult
from agentgrad.optim.base import Candidate
from agentgrad.runtime.engine import Engine
from agentgrad.runtime.records import Snapshot, candidate_to_dict
from agentgrad.store.commit import commit_step
from agentgrad.store.kinds import EventKind


def aggregate(engine: Engine, candidates: Sequence[Candidate]) -> StepResult:
    """One optimizer step on `candidates`, committed; its inputs are logged first, for resume and replay."""
    started = engine.clock()
    with engine.journal.unit():  # its inputs, commits, verdicts, events and checkpoint: one transaction
        result = _step(engine, candidates)
    engine.journal.counts["aggregate_us"] += round(1e6 * (engine.clock() - started))
    return result


def _step(engine: Engine, candidates: Sequence[Candidate]) -> StepResult:
    ctx = engine.context()
    step = engine.journal.steps
    engine.journal.in_step = True
    engine.journal.emit(EventKind.STEP, {"step": step, "now": ctx.now, "head": engine.head.version,
                        "head_hash": content_hash(engine.head.text), "noise": engine.noise.to_dict(),
                        "candidates": [candidate_to_dict(c) for c in candidates]})
    result = engine.aggregator.step(candidates, ctx)
    versions = commit_step(engine.store, result, candidates)
    parent = engine.head.text
    for version, accepted in zip(versions, result.accepted, strict=False):
        engine.watch.committed(version.number, version.text, parent, [accepted.origin] if accepted.origin else [])
        parent = version.text
    if versions:
        engine.head = Snapshot(versions[-1].number, versions[-1].text)
    finish_step(engine, step, result, versions, candidates)
    return result


def finish_step(engine: Engine, step: int, result: StepResult, versions: Sequence[Version],
                candidates: Sequence[Candidate] = ()) -> None:
    """Log a step's verdicts, commits and held work in one transaction, then write the checkpoint."""
    rows: list[tuple[EventKind, Mapping[str, Any]]] = [(EventKind.DECISION, {**d.to_dict(), "step": step})
                                                       for d in result.decisions]
    rows += [(EventKind.COMMIT, {"artifact": v.artifact_id, "version": v.number, "diff": v.diff_id})
             for v in versions]
    held = [{"candidate": candidate_to_dict(c), "outcome": result.decision_for(c.diff.id).outcome.value}
            for c in result.held]
    rows.append((EventKind.STEP_DONE, {"step": step, "held": held, "versions": [v.number for v in versions]}))
    engine.journal.emit_many(rows)
    final = {d.diff_id for d in result.decisions if d.outcome.final}
    engine.noise = engine.watch.flush(engine.noise.added(c.evidence for c in candidates if c.diff.id in final))
    for decision in result.decisions:
        engine.journal.counts[f"decision_{decision.outcome.value}"] += 1
        engine.drop_open(decision.diff_id, final=decision.outcome.final)
    engine.hold_open([c.diff for c in result.held])  # the store keeps only final verdicts
    for kept in result.held:  # still open: its origin's failure is still being acted on
        if kept.origin is not None:
            engine.pacing.note_origin(kept.diff.id, kept.origin)
    engine.journal.steps = step + 1
    for version in versions:
        if engine.config.promote_every > 0 and engine.promotion.observe_accepted(version.artifact_id):
            engine.promotion_due = True
    engine.journal.in_step = False
    engine.checkpoint()


__all__ = ["aggregate", "finish_step"]
