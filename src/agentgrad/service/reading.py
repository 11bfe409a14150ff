"""What a run directory holds, JSON-ready, for the API and the dashboard: its artifacts and versions, diffs and
decisions (with evidence), the per-example frontier, budget use, throughput and in-flight work, and rewards over
time.

Everything is read through the store's and the event log's public, read-only API (`RunDir.store`,
`RunDir.events`), so it works on a running, finished or killed run and writes nothing.
"""

from __future__ import annotations

import time
from typing import Any

from agentgrad.cli.rundir import RunDir
from agentgrad.cli.stats import LIMITS, RUN_KINDS, STAGES, RunStats
from agentgrad.cli.status import StatsReader, read_stats
from agentgrad.core.decision import Outcome
from agentgrad.runtime.frontier import stored_frontier
from agentgrad.service.errors import not_found
from agentgrad.service.rendering import unified
from agentgrad.store.codec import summarise
from agentgrad.store.sqlite import SQLiteStore


def check_artifact(store: SQLiteStore, artifact_id: str) -> str:
    """`artifact_id` if the run has it, else a 404."""
    if artifact_id not in store.artifact_ids():
        raise not_found(f"no artifact {artifact_id!r} in this run")
    return artifact_id


def artifacts(target: RunDir) -> list[dict[str, Any]]:
    """Every artifact: id, kind, layer, and its dev and stable head numbers."""
    with target.store() as store:
        dev, stable = store.heads("dev"), store.heads("stable")
        rows = []
        for artifact_id in store.artifact_ids():
            artifact = store.artifact(artifact_id)
            rows.append({"id": artifact_id, "kind": artifact.kind.value, "layer": str(getattr(artifact.layer, "value",
                                                                                               artifact.layer)),
                         "dev": dev[artifact_id].number, "stable": stable[artifact_id].number})
    return rows


def versions(target: RunDir, artifact_id: str, limit: int, offset: int, *, text: bool) -> tuple[list[dict[str, Any]],
                                                                                                 int]:
    """A page of an artifact's versions (oldest first) and how many there are."""
    with target.store() as store:
        history = store.history(check_artifact(store, artifact_id))
    page = history[offset:offset + limit]
    return [{"number": v.number, "diff_id": v.diff_id, "hash": v.hash, "text": v.text if text else None}
            for v in page], len(history)


def lineage(target: RunDir, artifact_id: str) -> list[dict[str, Any]]:
    """Every version of an artifact with the rendered diff from the version before it (for the dashboard)."""
    with target.store() as store:
        history = store.history(check_artifact(store, artifact_id))
    rows = []
    for before, version in zip([None, *history], history, strict=False):
        rows.append({"number": version.number, "diff_id": version.diff_id,
                     "unified": "" if before is None else unified(before.text, version.text,
                                                                  f"v{before.number}", f"v{version.number}"),
                     "text": version.text})
    return rows


def decisions(target: RunDir, *, outcome: Outcome | None, artifact_id: str | None, limit: int,
              offset: int) -> tuple[list[dict[str, Any]], int]:
    """A page of decisions (oldest first), each with its diff's evidence summary, and how many match."""
    with target.store() as store:
        if artifact_id is not None:
            check_artifact(store, artifact_id)
        page = store.decisions(artifact_id=artifact_id, outcome=outcome, limit=limit, offset=offset)
        total = store.decision_count(artifact_id=artifact_id, outcome=outcome)
        summaries: dict[str, Any] = {}
        for decision in page:
            if decision.diff_id not in summaries:
                summaries[decision.diff_id] = summarise(store.evidence(decision.diff_id))
    return [{**d.to_dict(), "evidence": summaries[d.diff_id]} for d in page], total


def diffs(target: RunDir, *, artifact_id: str | None, limit: int, offset: int) -> tuple[list[dict[str, Any]], int]:
    """A page of the run's diffs in the order they were first decided on, each with its latest verdict (one grouped
    query of the store: a page costs the same however long the run)."""
    with target.store() as store:
        if artifact_id is not None:
            check_artifact(store, artifact_id)
        page, total = store.standings(artifact_id=artifact_id, limit=limit, offset=offset)
    return [{"id": s.diff_id, "artifact_id": s.artifact_id, "outcome": s.outcome.value, "decisions": s.decisions}
            for s in page], total


def diff_view(target: RunDir, diff_id: str) -> dict[str, Any]:
    """A diff rendered: its ops, the unified diff it makes against its base version, and where it went."""
    from agentgrad.core.diff import apply
    from agentgrad.errors import AgentgradError

    with target.store() as store:
        info = store.why(diff_id)
        diff = store.diff(diff_id)
        base = store.version(diff.artifact_id, diff.base_version).text
        made = store.version(diff.artifact_id, info["version"]).text if info["version"] is not None else None
    note = None
    if made is None:
        try:
            made = apply(diff, base)
        except AgentgradError as exc:
            note = f"it does not apply to its base version: {exc}"
    after = f"v{info['version']}" if info["version"] is not None else "candidate"
    text = "" if made is None else unified(base, made, f"v{diff.base_version}", after)
    outcome = info["decisions"][-1]["outcome"] if info["decisions"] else None
    return {"diff": info["diff"], "version": info["version"], "outcome": outcome, "unified": text, "note": note}


def frontier(target: RunDir, *, artifact_id: str | None) -> list[dict[str, Any]]:
    """The examples only changes not committed won, and those changes (`runtime.frontier`): of one artifact's
    diffs, or of every diff of the run."""
    with target.store() as store:
        if artifact_id is not None:
            check_artifact(store, artifact_id)
        return [e.to_dict() for e in stored_frontier(store, artifact_id)]


def why(target: RunDir, diff_id: str) -> dict[str, Any]:
    """The store's account of a diff (`Store.why`)."""
    with target.store() as store:
        return store.why(diff_id)


def usage(target: RunDir, read: StatsReader = read_stats) -> dict[str, Any]:
    """Budget use against limits, calls in flight and done per stage, and throughput against its limit."""
    stats, checkpoint = read(target)
    used = stats.used()
    budget = {k: {"used": used[k], "limit": stats.limit(k)} for k in LIMITS[:-1]}
    budget["wall_time"] = {"used": float(checkpoint.get("wall_time", 0.0)), "limit": stats.limit("wall_time")}
    now = time.time() if stats.state() == "unfinished" else (stats.last_at or time.time())
    return {"budget": budget,
            "stages": {k: {"in_flight": stats.in_flight(k), "done": stats.done[k], "errors": stats.errors[k]}
                       for k in STAGES},
            "throughput": {"run_calls_per_s": stats.rate(RUN_KINDS, now), "limit_per_s": stats.rate_limit(),
                           "slots": stats.slots},
            "verdicts": dict(stats.outcome_counts()), "commits": len(stats.commits), "seq": stats.seq}


def rewards(target: RunDir, read: StatsReader = read_stats) -> dict[str, Any]:
    """The validation reward of each scored version at its commit time, and the held-out reward at the end."""
    stats, _ = read(target)
    t0 = stats.first_at or 0.0
    scores = stats.val_rewards()
    points = [(0, 0.0, 0), *((c.version, c.at - t0, c.rollouts) for c in stats.commits)]
    validation = [{"version": v, "t": t, "rollouts": r, "reward": scores[v]} for v, t, r in points if v in scores]
    held_out: list[dict[str, Any]] = []
    end = stats.finished or {}
    if end.get("test_reward") is not None and end.get("baseline") is not None:
        last = stats.commits[-1].version if stats.commits else 0
        span = (stats.last_at or t0) - t0
        held_out = [{"version": 0, "t": 0.0, "rollouts": 0, "reward": float(end["baseline"])},
                    {"version": last, "t": span, "rollouts": stats.done["rollouts"],
                     "reward": float(end["test_reward"])}]
    return {"validation": validation, "held_out": held_out}


def stats_of(target: RunDir, read: StatsReader = read_stats) -> RunStats:
    """The run's counters (for the dashboard's summary)."""
    return read(target)[0]
