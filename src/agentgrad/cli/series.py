"""The data behind `agentgrad report`, as one JSON-ready dict built from the run's event log and store.

Times are seconds since the run's first event (wall clock; a resumed run shows the pause). Series:
- reward: the validation reward of each version (estimated from the gate's evidence, see `RunStats`) at its commit
  time and rollout count; the held-out reward of the starting and the learned artifact (measured once, at the end).
- throughput: finished run calls (rollouts and gate evaluations) per second in equal time bins, and the limit the
  run slots allow at the measured mean call time.
- activity: the most calls running per stage (holding a slot) in each of a few hundred equal time cells, and the
  most calls dispatched but still waiting for a slot (queued).
- decisions: the latest verdict per diff (from the store), and proposals that never became a diff (by reason).
- lineage: every version of the artifact with the accepted diff that made it and the verdict's numbers.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from agentgrad.cli.rundir import RunDir
from agentgrad.cli.stats import LIMITS, RUN_KINDS, STAGES, RunStats
from agentgrad.store.events import Event

CELLS = 200
BINS = 50


def _throughput(events: Sequence[Event], t0: float, span: float, limit: float | None) -> dict[str, Any]:
    width = max(span / BINS, 1e-3)
    count = max(1, math.ceil(span / width))
    calls, rollouts = [0] * count, [0] * count
    for event in events:
        if event.kind == "done" and event.payload["kind"] in RUN_KINDS:
            index = min(count - 1, int((event.at - t0) / width))
            calls[index] += 1
            rollouts[index] += event.payload["kind"] == "rollouts"
    return {"bin": width, "t": [i * width for i in range(count)], "run_calls_per_s": [c / width for c in calls],
            "rollouts_per_s": [r / width for r in rollouts], "limit": limit}


def _intervals(events: Sequence[Event], t0: float, span: float) -> dict[str, list[tuple[float, float]]]:
    """Per stage, when each call ran (the end of its wait for a slot to its result); "queued" holds the waits.

    A call without a result ran until its process stopped (the next "resumed" event, or the end of the log).
    """
    starts: dict[int, tuple[str, float]] = {}
    spans: dict[str, list[tuple[float, float]]] = {k: [] for k in (*STAGES, "queued")}
    for event in events:
        call = int(event.payload.get("call", -1))
        if event.kind == "dispatch":
            starts[call] = (str(event.payload["kind"]), event.at - t0)
        elif event.kind == "done" and call in starts:
            kind, dispatched = starts.pop(call)
            end = event.at - t0
            began = min(end, max(dispatched, end - float(event.payload.get("seconds") or 0.0)))
            spans.setdefault(kind, []).append((began, end))
            spans["queued"].append((dispatched, began))
        elif event.kind == "resumed":
            for kind, dispatched in starts.values():
                spans.setdefault(kind, []).append((dispatched, max(dispatched, event.at - t0)))
            starts.clear()
    for kind, dispatched in starts.values():
        spans.setdefault(kind, []).append((dispatched, span))
    return spans


def _peaks(intervals: Sequence[tuple[float, float]], width: float, cells: int) -> list[int]:
    """The most intervals open at once within each cell."""
    changes = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda c: (c[0], c[1]))
    peaks, level, position = [0] * cells, 0, 0
    for cell in range(cells):
        end = (cell + 1) * width
        peak = level
        while position < len(changes) and (changes[position][0] < end or cell == cells - 1):
            level += changes[position][1]
            peak = max(peak, level)
            position += 1
        peaks[cell] = peak
    return peaks


def _activity(events: Sequence[Event], t0: float, span: float, slots: int | None) -> dict[str, Any]:
    width = max(span / CELLS, 1e-3)
    cells = max(1, math.ceil(span / width))
    spans = _intervals(events, t0, span)
    return {"cell": width, "t": [i * width for i in range(cells)], "slots": slots,
            "running": {kind: _peaks(spans.get(kind, []), width, cells) for kind in STAGES},
            "queued": _peaks(spans["queued"], width, cells)}


def _rewards(stats: RunStats, t0: float) -> dict[str, Any]:
    rewards = stats.val_rewards()
    points = [(0, 0.0, 0)] + [(c.version, c.at - t0, c.rollouts) for c in stats.commits]
    validation = [{"version": v, "t": t, "rollouts": r, "reward": rewards[v], "tasks": len(stats.scores[v])}
                  for v, t, r in points if v in rewards]
    held_out: list[dict[str, Any]] = []
    end = stats.finished or {}
    if end.get("test_reward") is not None and end.get("baseline") is not None:
        last = stats.commits[-1].version if stats.commits else 0
        span = (stats.last_at or t0) - t0
        held_out = [{"label": "start", "version": 0, "t": 0.0, "rollouts": 0, "reward": end["baseline"]},
                    {"label": "learned", "version": last, "t": span, "rollouts": stats.done["rollouts"],
                     "reward": end["test_reward"]}]
    return {"validation": validation, "held_out": held_out}


def _lineage(target: RunDir, artifact: str | None, stats: RunStats, t0: float) -> list[dict[str, Any]]:
    if artifact is None:
        return []
    times = {c.version: c.at - t0 for c in stats.commits}
    rows: list[dict[str, Any]] = []
    with target.store() as store:
        for version in store.history(artifact):
            row: dict[str, Any] = {"version": version.number, "diff": version.diff_id,
                                   "t": 0.0 if version.number == 0 else times.get(version.number)}
            if version.diff_id is not None:
                made = store.diff(version.diff_id)
                accepted = [d for d in store.decisions(diff_id=version.diff_id) if d.outcome.value == "accepted"]
                row["ops"] = [("" if op.member is None else f"{op.member}: ") + op.action.value + " "
                              + (op.new if op.new is not None else op.old or "").strip() for op in made.ops]
                row["author"] = made.author
                row["reason"] = accepted[-1].reason if accepted else ""
                row["numbers"] = dict(accepted[-1].numbers) if accepted else {}
            rows.append(row)
    return rows


def _decisions(target: RunDir, artifact: str | None) -> tuple[dict[str, int], str | None]:
    """The latest verdict per diff of the run's artifact (a library's members' parts are not counted again)."""
    with target.store() as store:
        latest = {d.diff_id: d.outcome.value for d in store.decisions(artifact_id=artifact)}
        ids = store.artifact_ids()
    return dict(Counter(latest.values())), (ids[0] if len(ids) == 1 else None)


def _frontier(target: RunDir, artifact: str | None) -> list[dict[str, Any]]:
    """The run's per-example frontier (`runtime.frontier`), JSON-ready."""
    from agentgrad.runtime.frontier import stored_frontier  # the judge's constants import scipy

    with target.store() as store:
        return [e.to_dict() for e in stored_frontier(store, artifact)]


def collect(target: RunDir) -> dict[str, Any]:
    """Everything the report shows, JSON-ready."""
    with target.events() as log:
        config = log.get("config")
        events = log.read()
    stats = RunStats()
    stats.configure(config)
    stats.feed(events)
    t0 = events[0].at if events else 0.0
    span = (events[-1].at - t0) if events else 0.0
    named = str(config["artifact"]) if isinstance(config, dict) and "artifact" in config else None
    mix, only = _decisions(target, named)
    artifact = named or only
    used = stats.used()
    return {
        "run_dir": str(target.path), "artifact": artifact, "state": stats.state(), "duration": span,
        "protocol": config.get("protocol") if isinstance(config, dict) else None,
        "reward": _rewards(stats, t0),
        "throughput": _throughput(events, t0, span, stats.rate_limit()),
        "activity": _activity(events, t0, span, stats.slots),
        "decisions": mix, "not_proposed": dict(stats.proposal_failed),
        "lineage": _lineage(target, artifact, stats, t0),
        "frontier": _frontier(target, artifact),
        "usage": {k: {"used": used[k], "limit": stats.limit(k)} for k in LIMITS[:-1]},
        "resumes": [e.at - t0 for e in events if e.kind == "resumed"],
    }
