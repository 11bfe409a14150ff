"""The kinds of events a run logs, in one place: the runtime writes them, resume, replay, the CLI and the trackers
read them.

`EventKind` is a `str` enum: a member equals its plain string (``EventKind.DECISION == "decision"``), so the log's
rows, JSON payloads and callbacks written against plain names keep working, while the runtime can only write a
kind listed here.
"""

from __future__ import annotations

from enum import Enum


class EventKind(str, Enum):
    """What an event of the run's log records."""

    STARTED = "started"  # the run began (callbacks only: the config is in the run's documents)
    RESUMED = "resumed"  # a killed or stopped run was picked up again
    DISPATCH = "dispatch"  # a call of a user function was granted its budget
    DONE = "done"  # that call ended: its actual spend
    CALL = "call"  # a call's details for the callbacks (its `done` row is what is logged)
    ROLLOUT = "rollout"  # a rollout's task, version and reward
    PROPOSAL = "proposal"  # a diff was proposed
    PROPOSAL_FAILED = "proposal_failed"  # a proposal could not become a diff
    REPAIR = "repair"  # a stale diff was repaired
    DECISION = "decision"  # a verdict on a diff
    STEP = "step"  # an optimizer step's inputs
    COMMIT = "commit"  # a new version of an artifact
    STEP_DONE = "step_done"  # an optimizer step finished (the work it held)
    PROMOTION = "promotion"  # a check of dev against stable, and what came of it
    REVERT = "revert"  # a harmful dev commit was reverted (or why it could not be)
    HELD_OUT = "held_out"  # the held-out reward (callbacks only)
    IDLE = "idle"  # the loop found no work to start
    FAILED = "failed"  # a systemic fault stopped the run
    FINISHED = "finished"  # the run ended

    def __str__(self) -> str:
        return self.value


def kind_name(kind: str) -> str:
    """The plain string stored for `kind` (a member's value; a plain string as it is)."""
    return kind.value if isinstance(kind, EventKind) else kind


# The run's named documents (`EventLog.put` / `get`).
CONFIG, CHECKPOINT, WALL = "config", "checkpoint", "wall"
