"""Which limit ended a run, read off what came back: the parent's reason for stopping, the code's wait status, its
CPU time, and the Python bootstrap's note."""

from __future__ import annotations

import os
import signal

from agentgrad.sandbox.limits import Limits
from agentgrad.sandbox.process import Outcome
from agentgrad.sandbox.result import LimitHit, SandboxResult

_NOTES = {"memory": LimitHit.MEMORY, "processes": LimitHit.PROCESSES, "file_size": LimitHit.FILE_SIZE}


def judge(outcome: Outcome, limits: Limits) -> SandboxResult:
    """The result of a run."""
    exit_code, killed_by = _ending(outcome.status)
    return SandboxResult(
        stdout=outcome.stdout.decode("utf-8", errors="replace"),
        stderr=outcome.stderr.decode("utf-8", errors="replace"),
        exit_code=exit_code, signal=killed_by, limit_hit=limit_hit(outcome, limits, killed_by),
        cpu_seconds=outcome.cpu_seconds, max_rss_bytes=outcome.max_rss_bytes, wall_seconds=outcome.wall_seconds,
        stdout_truncated=outcome.stdout_truncated, stderr_truncated=outcome.stderr_truncated)


def limit_hit(outcome: Outcome, limits: Limits, killed_by: int | None) -> LimitHit:
    """The limit that ended the run, or NONE when the code ended by itself."""
    if outcome.stopped is LimitHit.OUTPUT or outcome.stdout_truncated or outcome.stderr_truncated:
        return LimitHit.OUTPUT
    if outcome.stopped is LimitHit.WALL_CLOCK and (outcome.killed or outcome.status is None):
        return LimitHit.WALL_CLOCK
    if killed_by == signal.SIGXCPU or (killed_by == signal.SIGKILL and outcome.cpu_seconds >= limits.cpu_seconds):
        return LimitHit.CPU
    if killed_by == signal.SIGXFSZ:
        return LimitHit.FILE_SIZE
    failed = killed_by is not None or outcome.status != 0
    if failed and outcome.note in _NOTES:
        return _NOTES[outcome.note]
    return LimitHit.NONE


def _ending(status: int | None) -> tuple[int | None, int | None]:
    """(exit code, signal) of a wait status; a run torn down without a report ended by SIGKILL."""
    if status is None:
        return None, signal.SIGKILL
    if os.WIFSIGNALED(status):
        return None, os.WTERMSIG(status)
    return os.WEXITSTATUS(status), None
