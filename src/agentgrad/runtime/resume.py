"""Resume and replay, from the run directory's store and event log.

Resume: budgets are rebuilt from the dispatch and done events (a call dispatched but never finished counts as
spent, so a resumed run can never overshoot); the aggregator and the scheduler come back from the last
checkpoint; an optimizer step that was logged but not checkpointed (the process died inside it) is replayed from
its logged inputs, and its accepted diffs are committed unless the store already has them, so no commit is lost
or duplicated. Replay: re-runs every logged step through a fresh aggregator and reports any verdict that differs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentgrad.core.artifact import Artifact, content_hash
from agentgrad.core.decision import Decision, Outcome
from agentgrad.errors import StateDictError
from agentgrad.optim.aggregator import Aggregator, StepResult
from agentgrad.optim.base import Context, Head
from agentgrad.runtime.budget import KINDS
from agentgrad.runtime.engine import Engine, Snapshot, candidate_from_dict
from agentgrad.store.commit import commit_step
from agentgrad.store.events import Event, EventLog
from agentgrad.store.sqlite import SQLiteStore


def used_from_events(events: EventLog) -> dict[str, float]:
    """Budget use per kind: actual amounts of finished calls plus reserved amounts of unfinished ones."""
    used = dict.fromkeys(KINDS, 0.0)
    open_calls: dict[int, Mapping[str, float]] = {}
    for event in events.read(["dispatch", "done"]):
        call = int(event.payload["call"])
        if event.kind == "dispatch":
            open_calls[call] = event.payload["reserved"]
        else:
            open_calls.pop(call, None)
            for kind, amount in event.payload["actual"].items():
                used[kind] += float(amount)
    for reserved in open_calls.values():
        for kind, amount in reserved.items():
            used[kind] += float(amount)
    return used


def _context(store: SQLiteStore, artifact: Artifact, payload: Mapping[str, Any]) -> Context:
    version = store.version(artifact.id, int(payload["head"]))
    if content_hash(version.text) != payload["head_hash"]:
        raise StateDictError(f"step {payload['step']}: the store's version {version.number} does not match the log")
    layer = artifact.layer
    assert layer is not None
    return Context({artifact.id: Head(version.number, version.text, layer, artifact.kind)}, now=float(payload["now"]))


def _observe_gate(aggregator: Aggregator, event: Event, ctx: Context) -> None:
    decision = Decision.from_dict(event.payload)
    if decision.stage == "gate":
        aggregator.observe([decision], ctx)


def restore(engine: Engine) -> None:
    """Bring a fresh engine up to where the run directory's log says the run was."""
    events, store = engine.events, engine.store
    engine.meter.load_state_dict({"used": used_from_events(events)})
    engine.calls = events.count("dispatch")
    checkpoint = events.get("checkpoint")
    done_steps = 0
    after = 0
    if checkpoint is not None:
        engine.aggregator.load_state_dict(checkpoint["aggregator"])
        engine.estimator.load_state_dict(checkpoint["estimator"])
        engine.counts.update({k: int(v) for k, v in checkpoint["counts"].items()})
        engine.wall_before = float(checkpoint["wall_time"])
        done_steps = int(checkpoint["step"])
        after = int(checkpoint["seq"])
    engine.wall_before = max(engine.wall_before, engine.meter.used["wall_time"])
    for event in events.read(["step", "decision"], after=after):
        if event.kind == "decision":
            _observe_gate(engine.aggregator, event, engine.context())
        elif int(event.payload["step"]) >= done_steps:
            _redo_step(engine, event)
    engine.steps = max(engine.steps, done_steps)
    head = store.head(engine.artifact.id)
    engine.head = Snapshot(head.number, head.text)


def _redo_step(engine: Engine, event: Event) -> None:
    """Re-run a logged step that was never checkpointed; commit what it accepted unless already committed."""
    ctx = _context(engine.store, engine.artifact, event.payload)
    candidates = [candidate_from_dict(c) for c in event.payload["candidates"]]
    result = engine.aggregator.step(candidates, ctx)
    missing = [c for c in result.accepted if engine.store.why(c.diff.id).get("version") is None]
    if missing and len(missing) == len(result.accepted):
        commit_step(engine.store, result, candidates)
    engine.counts["replayed_steps"] += 1
    engine.steps = int(event.payload["step"]) + 1
    head = engine.store.head(engine.artifact.id)
    engine.head = Snapshot(head.number, head.text)
    engine.checkpoint()


@dataclass(frozen=True)
class ReplayReport:
    """What a replay found: steps re-run, verdicts compared, and any that differ from the log."""

    steps: int
    verdicts: int
    mismatches: tuple[str, ...]

    @property
    def identical(self) -> bool:
        return not self.mismatches


def replay(events: EventLog, store: SQLiteStore, aggregator: Aggregator, artifact: Artifact) -> ReplayReport:
    """Re-run every logged step through `aggregator` (fresh) and compare each verdict with the logged one.

    Verdicts reached outside a step (the gate's) are fed to the aggregator in log order, as the run did.
    """
    ctx = _context(store, artifact, {"step": -1, "head": 0, "now": 0.0,
                                     "head_hash": content_hash(store.version(artifact.id, 0).text)})
    steps, verdicts, mismatches = 0, 0, list[str]()
    current: tuple[int, StepResult, list[Decision]] | None = None
    for event in events.read(["step", "decision"]):
        if event.kind == "step":
            if current is not None:
                mismatches += _compare(*current)
            ctx = _context(store, artifact, event.payload)
            result = aggregator.step([candidate_from_dict(c) for c in event.payload["candidates"]], ctx)
            steps, verdicts = steps + 1, verdicts + len(result.decisions)
            current = (int(event.payload["step"]), result, [])
            continue
        decision = Decision.from_dict(event.payload)
        if decision.stage == "gate":
            aggregator.observe([decision], ctx)
        elif current is not None:
            current[2].append(decision)
    if current is not None:
        mismatches += _compare(*current)
    return ReplayReport(steps, verdicts, tuple(mismatches))


def _compare(step: int, result: StepResult, expected: Sequence[Decision]) -> list[str]:
    got = [(d.diff_id, d.outcome) for d in result.decisions]
    want = [(d.diff_id, Outcome(d.outcome)) for d in expected]
    return [] if got == want else [f"step {step}: replay gave {got}, the log says {want}"]
