"""Replaying the SQLite log into the git mirror: versions in commit order onto `dev`, stable changes onto `stable`.

The git objects are written outside the write lock (they are deterministic, so a duplicate is harmless); the
version -> sha rows and the ref moves happen under it, guarded by a compare-and-swap on the last mirrored seq, so
several stores syncing the same run at once never write a version twice.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from agentgrad.errors import ForeignMirrorError
from agentgrad.store import codec
from agentgrad.store.gitmirror import GitMirror, MirrorCommit, version_message

Transaction = Callable[[], AbstractContextManager[sqlite3.Connection]]

_DECISION = ", ".join(f"k.{column}" for column in codec.DECISION_COLUMNS.split(", "))

_PENDING = f"""
SELECT v.seq, v.artifact_id, v.number, b.text, v.created, d.body, {_DECISION}
FROM (SELECT * FROM versions WHERE seq > ? ORDER BY seq LIMIT ?) v
JOIN blobs b ON b.hash = v.hash
LEFT JOIN diffs d ON d.id = v.diff_id
LEFT JOIN decisions k ON k.diff_id = v.diff_id AND k.outcome = 'accepted'
ORDER BY v.seq, k.seq
"""

_TEXTS_AT = """
SELECT a.id, b.text FROM artifacts a
JOIN versions v ON v.seq = (SELECT max(w.seq) FROM versions w WHERE w.artifact_id = a.id AND w.seq <= ?)
JOIN blobs b ON b.hash = v.hash
"""

_NUMBERS_AT = """
SELECT a.id, (SELECT w.number FROM versions w WHERE w.artifact_id = a.id AND w.seq <= ? ORDER BY w.seq DESC LIMIT 1)
FROM artifacts a
"""

_TEXT_OF = """
SELECT b.text FROM versions v JOIN blobs b ON b.hash = v.hash WHERE v.artifact_id = ? AND v.number = ?
"""


def lag(conn: sqlite3.Connection) -> int:
    """How many committed versions are not in the mirror yet."""
    row = conn.execute(
        "SELECT count(*) FROM versions WHERE seq > (SELECT coalesce(max(seq), 0) FROM mirror)").fetchone()
    return int(row[0])


def check(conn: sqlite3.Connection, mirror: GitMirror, transaction: Transaction) -> bool:
    """Check the mirror against what the store says it mirrored; True if it had to be emptied for a rebuild.

    A mirror whose `dev` tip is the last commit the store wrote, and readable, is fine. A missing, emptied or
    damaged one is recreated empty and the store's record of it cleared, so the next `sync` writes the whole
    history again (the commits are deterministic: the same shas come back). A mirror with a history this store
    did not write (another run's) raises `ForeignMirrorError` and is left as it is.
    """
    last = conn.execute("SELECT seq, sha FROM mirror ORDER BY seq DESC LIMIT 1").fetchone()
    dev = mirror.branch("dev")
    if last is None:
        if dev is not None:
            raise ForeignMirrorError(f"{mirror.path} holds a history this run did not write (dev at {dev[:12]}); "
                                     "move it away or use a new run directory")
        return False
    sha = str(last[1])
    if dev == sha and mirror.readable(sha):
        return False
    if dev is not None and dev != sha and mirror.readable(dev) and not mirror.readable(sha):
        raise ForeignMirrorError(f"{mirror.path} holds a history this run did not write (dev at {dev[:12]}, the "
                                 f"store's last mirrored commit is {sha[:12]}); move it away or use a new run "
                                 "directory")
    mirror.recreate()
    with transaction() as c:
        c.execute("DELETE FROM mirror")
        c.execute("UPDATE stable_log SET git_sha = NULL")
    return True


def sync(conn: sqlite3.Connection, mirror: GitMirror, transaction: Transaction, *, batch: int = 2000) -> int:
    """Mirror every pending version and stable change; return how many git commits were written.

    Args:
        conn: the store's connection (reads run outside a transaction; versions never change once written).
        mirror: the git repository to write to.
        transaction: opens a write transaction (BEGIN IMMEDIATE) on `conn`.
        batch: versions per pack.
    """
    written = 0
    while True:
        count, done = _sync_versions(conn, mirror, transaction, batch)
        written += count
        if done:
            return written + _sync_stable(conn, mirror, transaction)


def _commit_of(row: Sequence[Any]) -> MirrorCommit:
    """The mirror commit of one `_PENDING` row."""
    _, artifact_id, number, text, created, body, *decision_row = row
    diff = codec.diff_from_json(body) if body is not None else None
    decision = codec.decision_from_row(decision_row) if decision_row[0] is not None else None
    return MirrorCommit(artifact_id, text, version_message(artifact_id, number, diff, decision), int(created),
                        diff.author if diff is not None else "")


def _sync_versions(conn: sqlite3.Connection, mirror: GitMirror, transaction: Transaction,
                   batch: int) -> tuple[int, bool]:
    """Mirror up to `batch` pending versions; returns (commits written, nothing left)."""
    last = conn.execute("SELECT seq, sha FROM mirror ORDER BY seq DESC LIMIT 1").fetchone()
    last_seq, parent = (int(last[0]), str(last[1])) if last is not None else (0, None)
    # one row per version: a diff commits once, so it has one accepted decision (keep the last, to be safe)
    rows = list({row[0]: row for row in conn.execute(_PENDING, (last_seq, batch)).fetchall()}.values())
    if not rows:
        return 0, True
    files = dict(conn.execute(_TEXTS_AT, (last_seq,)).fetchall())
    shas = mirror.write_versions(files, parent, [_commit_of(r) for r in rows])
    with transaction() as c:
        now_last = c.execute("SELECT coalesce(max(seq), 0) FROM mirror").fetchone()[0]
        if now_last != last_seq:  # another store mirrored meanwhile: start again from its tip
            return 0, False
        c.executemany("INSERT INTO mirror (seq, sha) VALUES (?, ?)",
                      [(row[0], sha) for row, sha in zip(rows, shas, strict=True)])
        mirror.set_branch("dev", shas[-1])
    return len(shas), len(rows) < batch


def _stable_message(reason: str, state: dict[str, int]) -> str:
    return f"stable: {reason}\n\n" + "".join(f"{a} v{n}\n" for a, n in sorted(state.items()))


def _stable_commit(conn: sqlite3.Connection, mirror: GitMirror, row: tuple[Any, ...], prev: str | None
                   ) -> tuple[str, bool]:
    """The git commit for one stable change: the dev commit if the state matches dev then, else a new snapshot.

    Returns (sha, whether a new commit was written).
    """
    _, upto, state_json, reason, created = row
    state: dict[str, int] = json.loads(state_json)
    numbers = {a: n for a, n in conn.execute(_NUMBERS_AT, (upto,)).fetchall() if n is not None}
    dev_sha = str(conn.execute("SELECT sha FROM mirror WHERE seq = ?", (upto,)).fetchone()[0])
    if numbers == state:
        return dev_sha, False
    files = {a: str(conn.execute(_TEXT_OF, (a, n)).fetchone()[0]) for a, n in state.items()}
    return mirror.write_snapshot(files, prev or dev_sha, _stable_message(reason, state), int(created)), True


def _sync_stable(conn: sqlite3.Connection, mirror: GitMirror, transaction: Transaction) -> int:
    """Move `stable` through every unmirrored stable change; returns how many new commits that took."""
    rows = conn.execute(
        "SELECT seq, upto, state, reason, created FROM stable_log WHERE git_sha IS NULL ORDER BY seq").fetchall()
    mirrored = conn.execute("SELECT coalesce(max(seq), 0) FROM mirror").fetchone()[0]
    prev_row = conn.execute(
        "SELECT git_sha FROM stable_log WHERE git_sha IS NOT NULL ORDER BY seq DESC LIMIT 1").fetchone()
    prev: str | None = prev_row[0] if prev_row is not None else None
    planned: list[tuple[str, int]] = []
    written = 0
    for row in rows:
        if row[1] > mirrored:  # its versions are not mirrored yet: next time
            break
        prev, new = _stable_commit(conn, mirror, tuple(row), prev)
        planned.append((prev, row[0]))
        written += new
    if planned:
        with transaction() as c:
            moved = [c.execute("UPDATE stable_log SET git_sha = ? WHERE seq = ? AND git_sha IS NULL", p).rowcount
                     for p in planned]
            if moved[-1] == 1:  # else another store got further meanwhile and moved the branch itself
                mirror.set_branch("stable", planned[-1][0])
    return written
