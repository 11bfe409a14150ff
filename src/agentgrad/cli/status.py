"""The state of a run directory, from its event log and store alone: works while a run goes, after it finished, and
on what a killed process left."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from agentgrad.cli.config import ConfigSource, parse_text
from agentgrad.cli.rundir import RunDir
from agentgrad.cli.stats import LIMITS, STAGES, RunStats
from agentgrad.errors import ConfigError

StatsReader = Callable[[RunDir], tuple[RunStats, dict[str, Any]]]


def read_stats(target: RunDir) -> tuple[RunStats, dict[str, Any]]:
    """Every event of the run folded into `RunStats`, and the last checkpoint (empty if none)."""
    stats = RunStats()
    with target.events() as log:
        stats.configure(log.get("config"))
        stats.feed(log.read())
        checkpoint = log.get("checkpoint")
    return stats, dict(checkpoint) if isinstance(checkpoint, dict) else {}


def describe_config(source: ConfigSource | None) -> dict[str, Any] | None:
    """What a stored configuration trains, in a few words (read as is: nothing is imported)."""
    if source is None:
        return None
    try:
        data = parse_text(source)
    except ConfigError as exc:
        return {"file": source.name, "problem": str(exc)}
    task = data.get("task") if isinstance(data, dict) else None
    model = data.get("model") if isinstance(data, dict) else None
    task = task if isinstance(task, dict) else {}
    model = model if isinstance(model, dict) else {}
    what = ("world" if "world" in task else f"set {task['set']}" if "set" in task else
            f"file {task.get('path')}")
    who = "simulated" if "world" in task else str(model.get("name") or model.get("run"))
    return {"file": source.name, "task": what, "model": who}


def _state(target: RunDir, stats: RunStats, note: dict[str, Any]) -> tuple[str, int | None]:
    ended = stats.state()
    if ended != "unfinished":
        return ended, None
    pid = target.running_pid()
    if pid is not None:
        return "running", pid
    if note.get("state") in ("interrupted", "failed"):
        return str(note["state"]), None
    return ("stopped" if stats.seq > 0 else "not started"), None


def _artifacts(target: RunDir) -> dict[str, dict[str, int]]:
    with target.store() as store:
        dev, stable = store.heads("dev"), store.heads("stable")
    return {a: {"dev": v.number, "stable": stable[a].number} for a, v in dev.items()}


def run_status(target: RunDir, read: StatsReader | None = None) -> dict[str, Any]:
    """A JSON-ready account of the run: state, budget use against limits, calls, verdicts, rewards, checkpoint.
    `read` folds the event log (default: `read_stats`, the whole log; the service passes its cache's)."""
    stats, checkpoint = (read or read_stats)(target)
    note = target.cli_state() or {}
    state, pid = _state(target, stats, note)
    used = stats.used()
    rewards = stats.val_history()
    hints = {"stopped": f"the process is gone; continue with: agentgrad resume {target.path}",
             "interrupted": f"continue with: agentgrad resume {target.path}",
             "failed": f"see agentgrad log {target.path}; after a fix: agentgrad resume {target.path}",
             "running": f"stop with: agentgrad cancel {target.path}"}
    return {
        "run_dir": str(target.path), "state": state, "pid": pid, "hint": hints.get(state),
        "config": describe_config(target.config_source()), "artifacts": _artifacts(target),
        "budget": {k: {"used": used[k], "limit": stats.limit(k)} for k in LIMITS[:-1]}
        | {"wall_time": {"used": float(checkpoint.get("wall_time", 0.0)), "limit": stats.limit("wall_time")}},
        "calls": {k: {"done": stats.done[k], "open": stats.in_flight(k), "errors": stats.errors[k]} for k in STAGES},
        "proposals": stats.proposals, "not_proposed": dict(stats.proposal_failed),
        "verdicts": dict(stats.outcome_counts()), "pending": stats.pending(), "commits": len(stats.commits),
        "validation_reward": None if not rewards else {"first": rewards[0], "best": max(rewards),
                                                       "last": rewards[-1]},
        "held_out": None if stats.finished is None else {"baseline": stats.finished.get("baseline"),
                                                         "learned": stats.finished.get("test_reward")},
        "error": stats.failed or note.get("error"), "resumes": stats.resumes,
        "checkpoint": None if not checkpoint else {"step": checkpoint.get("step"), "seq": checkpoint.get("seq")},
        "last_event": None if stats.last_at is None else {"seq": stats.seq, "ago": time.time() - stats.last_at},
    }
