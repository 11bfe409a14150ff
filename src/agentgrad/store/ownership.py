"""`WriterLock`: one writer per run directory, across processes, by an OS-level lock that dies with its holder.

`evolve()` takes it before it opens the store and keeps it until the run is closed; a second `evolve()` (in this
process or another) on the same directory gets `RunDirLockedError` at once, naming the holder (its pid, host and
start time, written beside the lock). The lock is ``flock``-based (`filelock`): a holder killed with -9 releases
it, so a resume after a crash is never refused. Readers (the CLI's status, show, report) take no lock.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from types import TracebackType

from filelock import FileLock, Timeout

from agentgrad.errors import RunDirLockedError

LOCK_NAME = "writer.lock"
HOLDER_NAME = "writer.json"


class WriterLock:
    """The writer's lock of `run_dir`. `acquire()` (or ``with``) takes it or raises `RunDirLockedError`."""

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        self._lock = FileLock(self.run_dir / LOCK_NAME, timeout=0, is_singleton=False, thread_local=False)

    @property
    def held(self) -> bool:
        return self._lock.is_locked

    def acquire(self) -> WriterLock:
        """Take the lock now, or raise `RunDirLockedError` saying who holds it."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._lock.acquire()
        except Timeout:
            raise RunDirLockedError(f"{self.run_dir} is being written by another run ({self.holder()}); wait for "
                                    "it to end, or use another run directory") from None
        (self.run_dir / HOLDER_NAME).write_text(json.dumps(
            {"pid": os.getpid(), "host": socket.gethostname(), "since": time.strftime("%Y-%m-%d %H:%M:%S")}))
        return self

    def holder(self) -> str:
        """Who holds the lock, as the holder wrote it (or that it is not known)."""
        try:
            data = json.loads((self.run_dir / HOLDER_NAME).read_text())
            return f"pid {data['pid']} on {data['host']}, since {data['since']}"
        except (OSError, ValueError, KeyError, TypeError):
            return "holder unknown"

    def release(self) -> None:
        if self._lock.is_locked:
            self._lock.release()

    def __enter__(self) -> WriterLock:
        return self.acquire()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.release()
