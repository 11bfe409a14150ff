"""The jobs table: one row per run the service started (its run directory is ``runs/<id>`` in the service's
home), in the service's own SQLite database (``service.db``).

A job outlives the process that serves it: its row says which worker process runs
it (`pid`), whether it should be running (`state`), who owns it and how often its worker was restarted. A service
started again reads the rows and takes up every active job (`Supervisor`).
"""

from __future__ import annotations

import secrets
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    owner TEXT NOT NULL,
    state TEXT NOT NULL,
    pid INTEGER,
    restarts INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS jobs_by_created ON jobs(created);
"""
_COLUMNS = "id, name, owner, state, pid, restarts, error, created, updated"


class JobState(str, Enum):
    """Where a job is. RUNNING and CANCELLING are active (a worker should be alive, or is being stopped)."""

    RUNNING = "running"
    CANCELLING = "cancelling"
    CANCELLED = "cancelled"
    FINISHED = "finished"
    FAILED = "failed"

    @property
    def active(self) -> bool:
        return self in (JobState.RUNNING, JobState.CANCELLING)


@dataclass(frozen=True)
class Job:
    """One row of the jobs table."""

    id: str
    name: str
    owner: str
    run_dir: Path
    state: JobState
    pid: int | None
    restarts: int
    error: str | None
    created: float
    updated: float


class Keep:
    """The marker for "leave this field as it is" in `JobTable.update`."""


KEEP = Keep()


def new_job_id() -> str:
    """A fresh job id (also its run directory's name)."""
    return "r" + secrets.token_hex(6)


def _job(row: tuple[Any, ...], runs_dir: Path) -> Job:
    return Job(str(row[0]), str(row[1]), str(row[2]), runs_dir / str(row[0]), JobState(row[3]),
               None if row[4] is None else int(row[4]), int(row[5]), row[6], float(row[7]), float(row[8]))


class JobTable:
    """The jobs of one service home, shared by the request handlers and the supervisor (one connection, a lock)."""

    def __init__(self, path: Path, runs_dir: Path, *, clock: Callable[[], float] = time.time) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.runs_dir = runs_dir
        self._clock = clock
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(str(path), timeout=30.0, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode = WAL")
        self._conn.execute("PRAGMA synchronous = NORMAL")
        self._conn.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def create(self, job_id: str, name: str, owner: str, *, limit: int) -> Job | None:
        """Insert a new RUNNING job (its worker is started next), unless `owner` already has `limit` active jobs
        (then None); the count and the insert are one transaction, so concurrent requests cannot exceed it."""
        now = self._clock()
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                if self._active_count(owner) >= limit:
                    return None
                self._conn.execute(f"INSERT INTO jobs ({_COLUMNS}) VALUES (?, ?, ?, ?, NULL, 0, NULL, ?, ?)",
                                   (job_id, name, owner, JobState.RUNNING.value, now, now))
            finally:
                self._conn.execute("COMMIT")
        return self.require(job_id)

    def reactivate(self, job_id: str, owner: str, *, limit: int) -> bool:
        """Set an inactive job RUNNING again (to resume it), unless `owner` already has `limit` active jobs or the
        job is active; False when it was not changed."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                if self._active_count(owner) >= limit:
                    return False
                done = [s.value for s in JobState if not s.active]
                cursor = self._conn.execute(
                    f"UPDATE jobs SET state = ?, error = NULL, updated = ? WHERE id = ? AND state IN "
                    f"({','.join('?' * len(done))})", (JobState.RUNNING.value, self._clock(), job_id, *done))
                return cursor.rowcount == 1
            finally:
                self._conn.execute("COMMIT")

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            row = self._conn.execute(f"SELECT {_COLUMNS} FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return None if row is None else _job(row, self.runs_dir)

    def require(self, job_id: str) -> Job:
        job = self.get(job_id)
        if job is None:
            raise KeyError(job_id)
        return job

    def page(self, limit: int, offset: int) -> tuple[list[Job], int]:
        """Jobs newest first, and how many there are."""
        with self._lock:
            rows = self._conn.execute(f"SELECT {_COLUMNS} FROM jobs ORDER BY created DESC, id LIMIT ? OFFSET ?",
                                      (limit, offset)).fetchall()
            total = int(self._conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0])
        return [_job(r, self.runs_dir) for r in rows], total

    def active(self) -> list[Job]:
        """Every job whose worker should be alive or is being stopped."""
        states = [s.value for s in JobState if s.active]
        with self._lock:
            rows = self._conn.execute(f"SELECT {_COLUMNS} FROM jobs WHERE state IN (?, ?) ORDER BY created",
                                      states).fetchall()
        return [_job(r, self.runs_dir) for r in rows]

    def active_count(self, owner: str) -> int:
        """How many active jobs `owner` has."""
        with self._lock:
            return self._active_count(owner)

    def _active_count(self, owner: str) -> int:
        states = [s.value for s in JobState if s.active]
        row = self._conn.execute("SELECT COUNT(*) FROM jobs WHERE owner = ? AND state IN (?, ?)",
                                 (owner, *states)).fetchone()
        return int(row[0])

    def update(self, job_id: str, *, state: JobState | None = None, pid: int | Keep | None = KEEP,
               restarts: int | None = None, error: str | Keep | None = KEEP) -> Job:
        """Change some fields of a job (`pid` and `error` are left alone unless given; None clears them)."""
        sets: list[str] = ["updated = ?"]
        params: list[Any] = [self._clock()]
        if state is not None:
            sets.append("state = ?")
            params.append(state.value)
        if not isinstance(pid, Keep):
            sets.append("pid = ?")
            params.append(pid)
        if restarts is not None:
            sets.append("restarts = ?")
            params.append(restarts)
        if not isinstance(error, Keep):
            sets.append("error = ?")
            params.append(error)
        with self._lock:
            self._conn.execute(f"UPDATE jobs SET {', '.join(sets)} WHERE id = ?", (*params, job_id))
        return self.require(job_id)
