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
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentgrad.store import tables
from agentgrad.store.kinds import kind_name
from agentgrad.store.transaction import Transactions


@dataclass(frozen=True)
class Event:
    """One logged event."""

    seq: int
    kind: str
    at: float
    payload: Mapping[str, Any]


class EventLog:
    """Append-only events and named JSON documents for one run directory (`<run_dir>/agentgrad.db`).

    `EventLog(run_dir)` opens its own connection (for readers: the CLI, a dashboard, tests);
    `SQLiteStore.journal` is the run's own log, sharing the store's connection and transactions (`sharing`), so
    that a store write and the events about it commit together (`SQLiteStore.transaction`).
    """

    def __init__(self, run_dir: str | Path, *, clock: Callable[[], float] = time.time, readonly: bool = False) -> None:
        path = Path(run_dir)
        if not readonly:
            path.mkdir(parents=True, exist_ok=True)
        # the store's schema (the log's tables are in it); `readonly`: an existing file, nothing written to it
        conn = tables.connect(path / tables.DB_NAME, 30.0, readonly=readonly)
        self._setup(Transactions(conn, str(path / tables.DB_NAME)), clock, owner=True)

    @classmethod
    def sharing(cls, transactions: Transactions, *, clock: Callable[[], float] = time.time) -> EventLog:
        """A log on another owner's connection and transactions (the store's); `close` leaves the connection open."""
        log = cls.__new__(cls)
        log._setup(transactions, clock, owner=False)
        return log

    def _setup(self, transactions: Transactions, clock: Callable[[], float], *, owner: bool) -> None:
        self.clock = clock
        self._tx, self._conn, self._owner = transactions, transactions.conn, owner
        self._deferred: list[tuple[str, float, str]] = []

    def close(self) -> None:
        """Write deferred events, then close the connection if this log opened it."""
        self.flush()
        if self._owner:
            self._conn.close()

    def transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        """One write transaction for several appends and puts (all or none); nested writes join it."""
        return self._tx.write()

    @property
    def deferred(self) -> int:
        """How many events wait to be written."""
        return len(self._deferred)

    def append(self, kind: str, payload: Mapping[str, Any], *, defer: bool = False) -> int:
        """Append one event and return its sequence number (committed with any deferred events before it, at
        once or with the enclosing transaction); with `defer`, only queue it (returns 0) until `flush` or the next
        write."""
        row = (kind_name(kind), self.clock(), _dump(payload))
        if defer:
            self._deferred.append(row)
            return 0
        with self._tx.write() as conn:
            self._write_deferred(conn)
            cursor = conn.execute("INSERT INTO events(kind, at, payload) VALUES (?, ?, ?)", row)
            return int(cursor.lastrowid or 0)

    def append_many(self, events: Iterable[tuple[str, Mapping[str, Any]]]) -> int:
        """Append several events (after any deferred ones) in one transaction (all or none); return the last
        sequence number."""
        now = self.clock()
        rows = [(kind_name(kind), now, _dump(payload)) for kind, payload in events]
        with self._tx.write() as conn:
            self._write_deferred(conn)
            conn.executemany("INSERT INTO events(kind, at, payload) VALUES (?, ?, ?)", rows)
            return _last(conn)

    def flush(self) -> None:
        """Write the deferred events, in order, in one transaction."""
        if self._deferred:
            with self._tx.write() as conn:
                self._write_deferred(conn)

    def _write_deferred(self, conn: sqlite3.Connection) -> None:
        if self._deferred:
            batch, self._deferred = self._deferred, []
            self._tx.on_rollback(lambda: self._put_back(batch))  # a rolled-back transaction loses no event
            conn.executemany("INSERT INTO events(kind, at, payload) VALUES (?, ?, ?)", batch)

    def _put_back(self, batch: list[tuple[str, float, str]]) -> None:
        self._deferred = batch + self._deferred

    def read(self, kinds: Sequence[str] | None = None, *, after: int = 0) -> list[Event]:
        """Events after sequence number `after`, optionally only of the given kinds, in order."""
        self.flush()
        sql = "SELECT seq, kind, at, payload FROM events WHERE seq > ?"
        params: list[Any] = [after]
        if kinds:
            sql += f" AND kind IN ({','.join('?' * len(kinds))})"
            params.extend(kind_name(k) for k in kinds)
        with self._tx.read() as conn:
            rows = conn.execute(sql + " ORDER BY seq", params).fetchall()
        return [Event(int(s), str(k), float(a), json.loads(p)) for s, k, a, p in rows]

    def last_seq(self) -> int:
        """The sequence number of the newest event (0 when there is none)."""
        self.flush()
        with self._tx.read() as conn:
            return _last(conn)

    def count(self, kind: str) -> int:
        """How many events of `kind` there are."""
        self.flush()
        with self._tx.read() as conn:
            return int(conn.execute("SELECT COUNT(*) FROM events WHERE kind = ?", (kind,)).fetchone()[0])

    def put(self, key: str, value: Any) -> None:
        """Store a named JSON document (replacing an older one), after the deferred events."""
        with self._tx.write() as conn:
            self._write_deferred(conn)
            conn.execute("INSERT OR REPLACE INTO run_state(key, value) VALUES (?, ?)", (key, _dump(value)))

    def get(self, key: str) -> Any:
        """A named JSON document, or None."""
        with self._tx.read() as conn:
            row = conn.execute("SELECT value FROM run_state WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])


def _last(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()[0])


def _dump(value: Any) -> str:
    """JSON text of `value`, ASCII only (non-ASCII and lone surrogates escaped, so SQLite can always store it)."""
    return json.dumps(value, ensure_ascii=True)
