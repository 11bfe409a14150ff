"""A synchronous `run` for the subprocess tests (`runtime.isolated`): importable by a worker process, it answers as
the small reference world of `helpers` does, and its first call hangs when `MARK` names a file to leave its pid in."""

from __future__ import annotations

import os
import time
from functools import cache
from pathlib import Path

from agentgrad.data.task import Task
from agentgrad.testing.world import ReferenceWorld, WorldConfig

MARK = "AGENTGRAD_TEST_HANG_MARK"


@cache
def _world() -> ReferenceWorld:
    return ReferenceWorld(WorldConfig(n_categories=4, tasks_per_category=40))  # as `helpers.WORLD`


def _first(mark: Path) -> bool:
    """True for exactly one caller across the worker processes: the one that creates `mark` (exclusively)."""
    try:
        with mark.open("x") as out:
            out.write(str(os.getpid()))
    except FileExistsError:
        return False
    return True


def solve(rendered: str, task: Task) -> str:
    """'solved' or 'failed' for the world; the first call of a run with `MARK` set hangs (for ten minutes)."""
    mark = os.environ.get(MARK)
    if mark and _first(Path(mark)):
        time.sleep(600)
    return "solved" if _world().solve(rendered, task.id) >= 1.0 else "failed"
