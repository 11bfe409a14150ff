"""The run's event log and checkpoint table, in the run directory's SQLite database.

Every dispatch, result, proposal, decision and commit is appended as it happens (JSON payloads, a growing
sequence number), so a killed run can be resumed and an asynchronous run replayed and audited afterwards.
Events that belong together (the verdicts and commits of one optimizer step) go in with `append_many`, in one
transaction: a killed process leaves all of them or none. Frequent small events may be *deferred*: they wait in
memory, in order, until `flush()` or the next write that is not deferred (group commit: one transaction for many
events; the runtime flushes once per turn of its event loop, before any call it logged can start).

`put`/`get` keep small named JSON documents (the run's configuration, the latest checkpoint). Payloads are stored
as ASCII JSON, so any Python string (even one with a lone surrogate, e.g. in a user function's error message)
round-trips.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    at REAL NOT NULL,
    payload TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_kind ON events(kind, seq);
CREATE TABLE IF NOT EXISTS run_state (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"""


@dataclass(frozen=True)
class Event:
    """One logged event."""

    seq: int
    kind: str
    at: float
    payload: Mapping[str, Any]


class EventLog:
    """Append-only events and named JSON documents for one run directory (`<run_dir>/agentgrad.db`)."""

    def __init__(self, run_dir: str | Path, *, clock: Callable[[], float] = time.time) -> None:
        path = Path(run_dir)
        path.mkdir(parents=True, exist_ok=True)
        self.clock = clock
        self._conn = sqlite3.connect(path / "agentgrad.db", timeout=30.0, isolation_level=None,
                                     check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.executescript(_SCHEMA)
        self._deferred: list[tuple[str, float, str]] = []

    def close(self) -> None:
        """Write deferred events, then close the connection."""
        self.flush()
        self._conn.close()

    @property
    def deferred(self) -> int:
        """How many events wait to be written."""
        return len(self._deferred)

    def append(self, kind: str, payload: Mapping[str, Any], *, defer: bool = False) -> int:
        """Append one event and return its sequence number (committed before this returns, with any deferred
        events before it); with `defer`, only queue it (returns 0) until `flush` or the next write."""
        row = (kind, self.clock(), _dump(payload))
        if defer:
            self._deferred.append(row)
            return 0
        if self._deferred:
            self._write([row])
            return self.last_seq()
        cursor = self._conn.execute("INSERT INTO events(kind, at, payload) VALUES (?, ?, ?)", row)
        return int(cursor.lastrowid or 0)

    def append_many(self, events: Iterable[tuple[str, Mapping[str, Any]]]) -> int:
        """Append several events (after any deferred ones) in one transaction (all or none); return the last
        sequence number."""
        now = self.clock()
        self._write([(kind, now, _dump(payload)) for kind, payload in events])
        return self.last_seq()

    def flush(self) -> None:
        """Write the deferred events, in order, in one transaction."""
        if self._deferred:
            self._write([])

    def _write(self, rows: list[tuple[str, float, str]]) -> None:
        batch = self._deferred + rows
        with self._transaction():
            self._conn.executemany("INSERT INTO events(kind, at, payload) VALUES (?, ?, ?)", batch)
        self._deferred = []

    def _transaction(self) -> _Tx:
        self._conn.execute("BEGIN IMMEDIATE")
        return _Tx(self._conn)

    def read(self, kinds: Sequence[str] | None = None, *, after: int = 0) -> list[Event]:
        """Events after sequence number `after`, optionally only of the given kinds, in order."""
        self.flush()
        sql = "SELECT seq, kind, at, payload FROM events WHERE seq > ?"
        params: list[Any] = [after]
        if kinds:
            sql += f" AND kind IN ({','.join('?' * len(kinds))})"
            params.extend(kinds)
        rows = self._conn.execute(sql + " ORDER BY seq", params).fetchall()
        return [Event(int(s), str(k), float(a), json.loads(p)) for s, k, a, p in rows]

    def last_seq(self) -> int:
        """The sequence number of the newest event (0 when there is none)."""
        self.flush()
        return int(self._conn.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()[0])

    def count(self, kind: str) -> int:
        """How many events of `kind` there are."""
        self.flush()
        return int(self._conn.execute("SELECT COUNT(*) FROM events WHERE kind = ?", (kind,)).fetchone()[0])

    def put(self, key: str, value: Any) -> None:
        """Store a named JSON document (replacing an older one), after the deferred events."""
        self.flush()
        self._conn.execute("INSERT OR REPLACE INTO run_state(key, value) VALUES (?, ?)", (key, _dump(value)))

    def get(self, key: str) -> Any:
        """A named JSON document, or None."""
        row = self._conn.execute("SELECT value FROM run_state WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])


def _dump(value: Any) -> str:
    """JSON text of `value`, ASCII only (non-ASCII and lone surrogates escaped, so SQLite can always store it)."""
    return json.dumps(value, ensure_ascii=True)


class _Tx:
    """Commit on success, roll back on error."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        return self.conn

    def __exit__(self, kind: object, error: object, tb: object) -> None:
        self.conn.execute("COMMIT" if kind is None else "ROLLBACK")
