"""Resume and replay, from the run directory's store and event log.

Resume: budgets are rebuilt from the dispatch and done events (a call dispatched but never finished counts as
spent, so a resumed run can never overshoot); the aggregator and the scheduler come back from the last
checkpoint, then every later event is applied in log order: verdicts reached outside a step are observed, and an
optimizer step that was logged but never finished (the process died inside it) is re-run from its logged inputs.
Its accepted diffs are committed unless the store already has them (a step commits in one transaction, so it is
all or none), and its verdicts are logged once: no commit is lost or duplicated. Work that was in flight (held
candidates, proposals without a verdict) is handed back to the runtime to be evaluated again.

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
from agentgrad.store.commit import commit_step
from agentgrad.store.events import Event, EventLog
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
    for event in events.read(["dispatch", "done"]):
        call = int(event.payload["call"])
        if event.kind == "dispatch":
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


def _next_call_after_stored_diffs(engine: Engine) -> int:
    """One past the highest call number any stored diff id carries (ids are `p<call>`): the store may hold a diff
    whose events a killed process never wrote, and a new diff must never reuse its id."""
    numbers = [int(d.diff_id[1:7]) for d in engine.store.decisions()
               if len(d.diff_id) >= 7 and d.diff_id[0] == "p" and d.diff_id[1:7].isdigit()]
    return max(numbers, default=-1) + 1


def restore(engine: Engine) -> Work:
    """Bring a fresh engine up to where the run directory's log says the run was; return the work in flight."""
    events = engine.events
    engine.meter.load_state_dict(meter_from_events(events))
    engine.calls = max(events.count("dispatch"), _next_call_after_stored_diffs(engine))
    checkpoint = events.get("checkpoint")
    done_steps, after = 0, 0
    if checkpoint is not None:
        engine.aggregator.load_state_dict(checkpoint["aggregator"])
        engine.estimator.load_state_dict(checkpoint["estimator"])
        if "promotion" in checkpoint:
            engine.promotion.load_state_dict(checkpoint["promotion"])
            engine.promotion_due = bool(checkpoint.get("promotion_due", False))
        engine.counts.update({k: int(v) for k, v in checkpoint["counts"].items()})
        engine.noise = NoiseEstimate.load(checkpoint.get("noise"))
        engine.wall_before = float(checkpoint["wall_time"])
        done_steps, after = int(checkpoint["step"]), int(checkpoint["seq"])
    noted = events.get("wall")  # written while the loop ran: later than the checkpoint if the process was killed
    if noted is not None:
        engine.wall_before = max(engine.wall_before, float(noted["wall_time"]))
    engine.meter.used["wall_time"] = engine.wall_before
    engine.steps = done_steps
    finished = {int(e.payload["step"]) for e in events.read(["step_done"])}
    for event in events.read(["step", "decision"], after=after):
        if event.kind == "decision" and not _is_step_verdict(event):
            engine.aggregator.observe([Decision.from_dict(event.payload)], engine.context())
        elif event.kind == "step" and int(event.payload["step"]) >= done_steps:
            _redo_step(engine, event, logged=int(event.payload["step"]) in finished)
    head = engine.store.head(engine.artifact.id)
    engine.head = Snapshot(head.number, head.text)
    pending = _in_flight(engine)
    engine.checkpoint()
    return pending


def _redo_step(engine: Engine, event: Event, *, logged: bool) -> None:
    """Re-run a step the checkpoint does not cover; if it never finished, commit and log what it decided."""
    ctx = _context(engine.store, engine.artifact, event.payload)
    step = int(event.payload["step"])
    candidates = [candidate_from_dict(c) for c in event.payload["candidates"]]
    result = engine.aggregator.step(candidates, ctx)
    engine.steps = step + 1
    engine.noise = ctx.noise or NoiseEstimate()
    if logged:
        final = {d.diff_id for d in result.decisions if d.outcome.final}
        engine.noise = engine.noise.added(c.evidence for c in candidates if c.diff.id in final)
        return
    engine.counts["replayed_steps"] += 1
    committed = {v.diff_id: v for v in engine.store.history(engine.artifact.id)}
    present = [committed[c.diff.id] for c in result.accepted if c.diff.id in committed]
    if not present:
        versions = commit_step(engine.store, result, candidates)
    elif len(present) == len(result.accepted):
        versions = present
        commit_step(engine.store, StepResult((), result.decisions, result.held), candidates)  # verdicts only
    else:
        raise StateDictError(f"step {step}: the store holds only some of the diffs this step accepted")
    engine.in_step = True
    engine.finish_step(step, result, versions, candidates)


def _in_flight(engine: Engine) -> Work:
    """Proposals and held candidates without a final verdict, in log order.

    A verdict the store has but the log lost (the process died between the two writes) is logged now.
    """
    pending: dict[str, tuple[Candidate, Outcome]] = {}
    for event in engine.events.read(["proposal", "decision", "step_done"]):
        if event.kind == "proposal":
            diff = Diff.from_dict(event.payload["diff"])
            pending[diff.id] = (Candidate(diff, Evidence(())), Outcome.RECHECK)
        elif event.kind == "step_done":
            for item in event.payload["held"]:
                candidate = candidate_from_dict(item["candidate"])
                pending[candidate.diff.id] = (candidate, Outcome(item["outcome"]))
        elif Outcome(event.payload["outcome"]).final:
            pending.pop(event.payload["diff_id"], None)
    for diff_id in list(pending):
        stored = engine.store.decisions(diff_id=diff_id)
        if stored and stored[-1].outcome.final:
            engine.aggregator.observe([stored[-1]], engine.context())
            engine.emit("decision", stored[-1].to_dict())
            del pending[diff_id]
    engine.hold_open([c.diff for c, _ in pending.values()])
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
    for event in events.read(["step", "decision"]):
        if event.kind == "step":
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
