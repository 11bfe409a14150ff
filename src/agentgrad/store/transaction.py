"""Write transactions on one SQLite connection, shared by the store and the event log.

`Transactions.write()` opens ``BEGIN IMMEDIATE`` (one writer at a time across threads and processes) and commits
when the block ends, or rolls everything back if it raises. A `write()` inside another joins it as a savepoint:
its own failure undoes only its own writes, and nothing is durable before the outermost block commits. So an
optimizer step can write its commits, verdicts, events and checkpoint in one transaction, each part using the
same methods it uses alone. Work that must only follow a durable commit (mirroring to git) is queued with
`after_commit`: it runs once the outermost block has committed, and is dropped on a rollback; `on_rollback` hooks
put back what a rolled-back transaction had taken out of memory (the event log's deferred events).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from agentgrad.errors import DamagedStoreError


@contextmanager
def damage_reported(where: str) -> Iterator[None]:
    """Turn the driver's report of a damaged file ("file is not a database", "database disk image is malformed":
    a plain `sqlite3.DatabaseError`, not one of its subclasses such as a busy `OperationalError`) into a
    `DamagedStoreError` naming the file."""
    try:
        yield
    except sqlite3.DatabaseError as exc:
        if type(exc) is not sqlite3.DatabaseError:
            raise
        raise DamagedStoreError(f"{where or 'the store'} is damaged or is not an agentgrad store: {exc}") from exc


class Transactions:
    """The transaction state of one connection.

    Args:
        conn: a connection in autocommit mode (``isolation_level=None``): transactions are explicit.
    State: a re-entrant lock (one thread in a transaction at a time), the nesting depth, and the hooks waiting for
    the outermost commit.
    """

    def __init__(self, conn: sqlite3.Connection, where: str = "") -> None:
        self.conn, self.where = conn, where
        self.lock = threading.RLock()
        self.depth = 0
        self._after: list[Callable[[], None]] = []
        self._undo: list[Callable[[], None]] = []

    @property
    def active(self) -> bool:
        """True inside a write transaction."""
        return self.depth > 0

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction: all or nothing; nested in another, a savepoint of it."""
        with self.lock, damage_reported(self.where):
            if self.depth:
                yield from self._savepoint()
                return
            self.conn.execute("BEGIN IMMEDIATE")
            self.depth = 1
            try:
                yield self.conn
                self.conn.execute("COMMIT")
            except BaseException:
                self._after.clear()
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                undo, self._undo = self._undo, []
                for hook in reversed(undo):
                    hook()
                raise
            finally:
                self.depth = 0
            self._undo.clear()
            hooks, self._after = self._after, []
            for hook in hooks:
                hook()

    def _savepoint(self) -> Iterator[sqlite3.Connection]:
        name = f"nested{self.depth}"
        self.conn.execute(f"SAVEPOINT {name}")
        self.depth += 1
        try:
            yield self.conn
        except BaseException:
            self.conn.execute(f"ROLLBACK TO {name}")
            self.conn.execute(f"RELEASE {name}")
            raise
        else:
            self.conn.execute(f"RELEASE {name}")
        finally:
            self.depth -= 1

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A read transaction (one consistent snapshot for several queries); inside a write, that write."""
        with self.lock, damage_reported(self.where):
            if self.depth:
                yield self.conn
                return
            self.conn.execute("BEGIN")
            try:
                yield self.conn
            finally:
                self.conn.execute("COMMIT")

    def on_rollback(self, hook: Callable[[], None]) -> None:
        """Run `hook` if the outermost transaction now open rolls back (to put back in memory what it took away)."""
        with self.lock:
            if self.depth:
                self._undo.append(hook)

    def after_commit(self, hook: Callable[[], None]) -> None:
        """Run `hook` once the outermost transaction commits (at once when none is open); dropped on rollback."""
        with self.lock:
            if self.depth:
                self._after.append(hook)
                return
        hook()
