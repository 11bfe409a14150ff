"""Resume and replay, from the run directory's store and event log.

Resume: budgets are rebuilt from the dispatch and done events (a call dispatched but never finished counts as
spent, so a resumed run can never overshoot); the aggregator and the scheduler come back from the last
checkpoint, then the verdicts reached outside a step after it are observed in log order. An optimizer step writes
its inputs, commits, verdicts, events and the checkpoint in one transaction (`Engine.aggregate`): a process killed
inside it leaves none of it, so no commit is lost or duplicated and nothing needs reconciling. Work that was in
flight (held candidates, proposals without a verdict) is handed back to the runtime to be evaluated again.

Replay: re-runs every logged step through a fresh aggregator and reports any verdict that differs from the log.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentgrad.core.artifact import Artifact, content_hash
from agentgrad.core.decision import Decision, Outcome
from agentgrad.core.diff import Diff
from agentgrad.core.evidence import Evidence
from agentgrad.errors import StateDictError
from agentgrad.optim.aggregator import Aggregator, StepResult
from agentgrad.optim.base import Candidate, Context, Head
from agentgrad.optim.noise import NoiseEstimate
from agentgrad.runtime.budget import BOUNDED, KINDS
from agentgrad.runtime.engine import Engine
from agentgrad.runtime.records import Snapshot, candidate_from_dict
from agentgrad.store.events import Event, EventLog
from agentgrad.store.kinds import CHECKPOINT, WALL, EventKind
from agentgrad.store.sqlite import SQLiteStore

Work = list[tuple[Candidate, Outcome]]


def used_from_events(events: EventLog) -> dict[str, float]:
    """Budget use per kind: actual amounts of finished calls plus reserved amounts of unfinished ones."""
    return meter_from_events(events)["used"]


def meter_from_events(events: EventLog) -> dict[str, dict[str, float]]:
    """The meter's state as the log tells it: `used` (as `used_from_events`) and `bound`, the most tokens and
    cost one finished call spent (a resumed run reserves at least that much per call)."""
    used = dict.fromkeys(KINDS, 0.0)
    bound = dict.fromkeys(BOUNDED, 0.0)
    open_calls: dict[int, Mapping[str, float]] = {}
    for event in events.read([EventKind.DISPATCH, EventKind.DONE]):
        call = int(event.payload["call"])
        if event.kind == EventKind.DISPATCH:
            open_calls[call] = event.payload["reserved"]
            continue
        open_calls.pop(call, None)
        for kind, amount in event.payload["actual"].items():
            used[kind] += float(amount)
            if kind in bound:
                bound[kind] = max(bound[kind], float(amount))
    for reserved in open_calls.values():
        for kind, amount in reserved.items():
            used[kind] += float(amount)
    return {"used": used, "bound": bound}


def _context(store: SQLiteStore, artifact: Artifact, payload: Mapping[str, Any]) -> Context:
    version = store.version(artifact.id, int(payload["head"]))
    if content_hash(version.text) != payload["head_hash"]:
        raise StateDictError(f"step {payload['step']}: the store's version {version.number} does not match the log")
    layer = artifact.layer
    assert layer is not None
    return Context({artifact.id: Head(version.number, version.text, layer, artifact.kind)}, now=float(payload["now"]),
                   noise=NoiseEstimate.load(payload["noise"]) if "noise" in payload else None)


def _is_step_verdict(event: Event) -> bool:
    return "step" in event.payload


def restore(engine: Engine) -> Work:
    """Bring a fresh engine up to where the run directory's log says the run was; return the work in flight.

    A step's events, commits, verdicts and checkpoint were written in one transaction (`Engine.aggregate`), so
    the checkpoint covers every step in the log; after it come only verdicts reached outside a step (the gate's),
    which are observed again in order."""
    events = engine.journal.events
    engine.accounts.meter.load_state_dict(meter_from_events(events))
    checkpoint = events.get(CHECKPOINT)
    after = 0 if checkpoint is None else engine.load_state_dict(checkpoint)
    # calls made after the checkpoint too
    engine.journal.calls = max(engine.journal.calls, events.count(EventKind.DISPATCH))
    noted = events.get(WALL)  # written while the loop ran: later than the checkpoint if the process was killed
    if noted is not None:
        engine.journal.wall_before = max(engine.journal.wall_before, float(noted["wall_time"]))
    engine.accounts.meter.used["wall_time"] = engine.journal.wall_before
    for event in events.read([EventKind.STEP, EventKind.DECISION], after=after):
        if event.kind == EventKind.STEP or _is_step_verdict(event):
            raise StateDictError(f"{engine.store.run_dir}: step {event.payload['step']} is in the log after the "
                                 "last checkpoint (a run directory written by an older agentgrad); start a new run")
        engine.aggregator.observe([Decision.from_dict(event.payload)], engine.context())
    head = engine.store.head(engine.artifact.id)
    engine.head = Snapshot(head.number, head.text)
    pending = _in_flight(engine)
    engine.checkpoint()
    return pending


def _in_flight(engine: Engine) -> Work:
    """Proposals and held candidates without a final verdict, in log order (a verdict and its event were written
    together, so the log alone tells)."""
    pending: dict[str, tuple[Candidate, Outcome]] = {}
    for event in engine.journal.events.read([EventKind.PROPOSAL, EventKind.DECISION, EventKind.STEP_DONE]):
        if event.kind == EventKind.PROPOSAL:
            diff = Diff.from_dict(event.payload["diff"])
            pending[diff.id] = (Candidate(diff, Evidence(())), Outcome.RECHECK)
        elif event.kind == EventKind.STEP_DONE:
            for item in event.payload["held"]:
                candidate = candidate_from_dict(item["candidate"])
                pending[candidate.diff.id] = (candidate, Outcome(item["outcome"]))
        elif Outcome(event.payload["outcome"]).final:
            pending.pop(event.payload["diff_id"], None)
    engine.hold_open([c.diff for c, _ in pending.values()], first=False)  # where each was born is not known
    for candidate, _ in pending.values():  # their origins' failures are still being acted on
        if candidate.origin is not None:
            engine.pacing.note_origin(candidate.diff.id, candidate.origin)
    return list(pending.values())


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
    results: dict[int, StepResult] = {}
    logged: dict[int, list[Decision]] = {}
    for event in events.read([EventKind.STEP, EventKind.DECISION]):
        if event.kind == EventKind.STEP:
            step = int(event.payload["step"])
            if step in results:
                continue  # a step logged twice (cannot happen; never re-run it)
            ctx = _context(store, artifact, event.payload)
            results[step] = aggregator.step([candidate_from_dict(c) for c in event.payload["candidates"]], ctx)
        elif _is_step_verdict(event):
            logged.setdefault(int(event.payload["step"]), []).append(Decision.from_dict(event.payload))
        else:
            aggregator.observe([Decision.from_dict(event.payload)], ctx)
    mismatches = [m for step, result in sorted(results.items()) for m in _compare(step, result, logged.get(step, []))]
    return ReplayReport(len(results), sum(len(r.decisions) for r in results.values()), tuple(mismatches))


def _compare(step: int, result: StepResult, expected: Sequence[Decision]) -> list[str]:
    got = [(d.diff_id, d.outcome) for d in result.decisions]
    want = [(d.diff_id, Outcome(d.outcome)) for d in expected]
    return [] if got == want else [f"step {step}: replay gave {got}, the log says {want}"]
