"""The SQL of the store, one function per statement group, all on a connection the caller holds.

No function here opens or ends a transaction: `SQLiteStore` wraps them in one (BEGIN IMMEDIATE for writes).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import quote

from agentgrad.core._checks import is_integer
from agentgrad.core.artifact import Version, content_hash
from agentgrad.core.decision import Decision, Outcome, Standing
from agentgrad.core.diff import Diff
from agentgrad.core.evidence import Evidence
from agentgrad.core.ids import validate_id
from agentgrad.errors import (
    DamagedStoreError,
    InvalidIdError,
    StateDictError,
    UnknownArtifactError,
    UnknownVersionError,
)
from agentgrad.store import codec
from agentgrad.store.transaction import damage_reported

DB_NAME = "agentgrad.db"  # the run directory's database: the store and its event log
SCHEMA_VERSION = 2  # 2: the event log tables joined the schema (a version 1 file is upgraded in place)
BRANCHES = ("dev", "stable")

_HEAD = """
SELECT a.kind, a.layer, h.number, v.hash, v.diff_id FROM artifacts a
JOIN heads h ON h.artifact_id = a.id AND h.branch = ?
JOIN versions v ON v.artifact_id = a.id AND v.number = h.number
WHERE a.id = ?
"""
VERSIONS = "SELECT v.artifact_id, v.number, b.text, v.diff_id, v.hash FROM versions v JOIN blobs b ON b.hash = v.hash"
INSERT_VERSION = "INSERT INTO versions (artifact_id, number, hash, diff_id, created) VALUES (?, ?, ?, ?, ?)"
_INSERT_DECISION = f"INSERT INTO decisions ({codec.DECISION_COLUMNS}, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"


class HeadRow(NamedTuple):
    """The head of one artifact on one branch, as stored (text by hash)."""

    kind: str
    layer: str
    number: int
    hash: str
    diff_id: str | None


def connect(path: Path, busy_timeout: float, *, readonly: bool = False) -> sqlite3.Connection:
    """Open (and if new, create) the database with WAL, synchronous=NORMAL, a busy timeout and foreign keys.

    The connection is in autocommit mode (``isolation_level=None``): transactions are explicit. `readonly` opens
    an existing database without writing anything, not even a setting (so a directory the user cannot write can
    be read); every write through it fails.
    """
    if path.is_dir():
        raise DamagedStoreError(f"{path} is a directory, not an agentgrad store's database file")
    if readonly:
        return _read_only(path, busy_timeout)
    conn = sqlite3.connect(str(path), timeout=busy_timeout, isolation_level=None, check_same_thread=False)
    try:
        with damage_reported(str(path)):
            _prepare(conn, path, busy_timeout)
    except BaseException:
        conn.close()
        raise
    return conn


def _prepare(conn: sqlite3.Connection, path: Path, busy_timeout: float) -> None:
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
    version = _check_version(conn, path, fresh=True)  # before anything is written: a foreign file stays as it was
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    if version < SCHEMA_VERSION:
        schema = resources.files("agentgrad.store").joinpath("schema.sql").read_text("utf-8")
        conn.executescript(f"BEGIN IMMEDIATE;\n{schema}\nPRAGMA user_version = {SCHEMA_VERSION};\nCOMMIT;")


def _read_only(path: Path, busy_timeout: float) -> sqlite3.Connection:
    """A connection that writes nothing. A WAL database is read beside its writer through the ``-wal`` and
    ``-shm`` files; when they are absent (no writer: they exist while one is open) and cannot be created (a
    directory the user cannot write), the file is opened as immutable, which needs neither."""
    for options in ("mode=ro", "mode=ro&immutable=1"):
        conn = sqlite3.connect(f"file:{quote(str(path))}?{options}", timeout=busy_timeout, isolation_level=None,
                               check_same_thread=False, uri=True)
        try:
            with damage_reported(str(path)):
                conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
                conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
                _check_version(conn, path, fresh=False)
            return conn
        except sqlite3.OperationalError as exc:
            conn.close()
            if "immutable" in options or not ("readonly" in str(exc) or "unable to open" in str(exc)):
                raise
        except BaseException:
            conn.close()
            raise
    raise AssertionError("unreachable")  # pragma: no cover


def _check_version(conn: sqlite3.Connection, path: Path, *, fresh: bool) -> int:
    """The file's schema version; `DamagedStoreError` if it is an SQLite database agentgrad did not make (version
    0 with tables of its own), or with `fresh` False (a reader) one that holds no store yet (an empty file)."""
    conn.execute("BEGIN")  # one snapshot: a writer creating the schema commits its tables and version together
    try:
        found = int(conn.execute("PRAGMA user_version").fetchone()[0])
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' LIMIT 4")]
    finally:
        conn.execute("COMMIT")
    if found > SCHEMA_VERSION:
        raise StateDictError(f"{path}: schema version {found} is newer than this agentgrad ({SCHEMA_VERSION})")
    if found == 0:
        if names:
            raise DamagedStoreError(f"{path} is not an agentgrad store: an SQLite database of something else "
                                    f"(tables {names}); nothing was written to it")
        if not fresh:
            raise DamagedStoreError(f"{path} holds no agentgrad store (an empty database): not a run directory's "
                                    "database, or one whose run never wrote to it")
    return found


def check_branch(branch: str) -> str:
    """`branch` if it is ``dev`` or ``stable``, else `InvalidIdError`."""
    if branch not in BRANCHES:
        raise InvalidIdError(f"unknown branch {branch!r}; expected one of {BRANCHES}")
    return branch


def head(conn: sqlite3.Connection, artifact_id: str, branch: str = "dev") -> HeadRow:
    """The head of `artifact_id` on `branch` (`UnknownArtifactError` if there is no such artifact)."""
    row = conn.execute(_HEAD, (check_branch(branch), validate_id(artifact_id))).fetchone()
    if row is None:
        raise UnknownArtifactError(f"unknown artifact {artifact_id!r}")
    return HeadRow(*row)


def branch_numbers(conn: sqlite3.Connection, branch: str) -> dict[str, int]:
    """{artifact_id: head version number} on `branch`."""
    rows = conn.execute("SELECT artifact_id, number FROM heads WHERE branch = ?", (check_branch(branch),))
    return dict(rows.fetchall())


def version(conn: sqlite3.Connection, artifact_id: str, number: int) -> Version:
    """Version `number` of an artifact (`UnknownArtifactError` / `UnknownVersionError` if missing)."""
    in_range = is_integer(number, low=0, high=2**63 - 1)  # what SQLite can hold; others are no version
    row = conn.execute(VERSIONS + " WHERE v.artifact_id = ? AND v.number = ?",
                       (validate_id(artifact_id), number)).fetchone() if in_range else None
    if row is None:
        head(conn, artifact_id)
        raise UnknownVersionError(f"artifact {artifact_id!r} has no version {number}")
    return Version(*row)


def check_tree_path(conn: sqlite3.Connection, artifact_id: str) -> None:
    """Refuse an id that would be a file and a directory at once in the git tree (``a`` and ``a/b``)."""
    parts = artifact_id.split("/")
    clash = conn.execute("SELECT id FROM artifacts WHERE id > ? AND id < ? LIMIT 1",  # ids under artifact_id/
                         (artifact_id + "/", artifact_id + "0")).fetchone()
    for depth in range(1, len(parts)):
        clash = clash or conn.execute("SELECT id FROM artifacts WHERE id = ?", ("/".join(parts[:depth]),)).fetchone()
    if clash is not None:
        raise InvalidIdError(f"artifact id {artifact_id!r} clashes with {clash[0]!r}: one would be a file and a "
                             "directory at once in the git mirror")


def log_stable(conn: sqlite3.Connection, reason: str, now: float) -> None:
    """Note that the stable branch changed (for the git mirror): its state now and the last version seq."""
    upto = conn.execute("SELECT max(seq) FROM versions").fetchone()[0]
    conn.execute("INSERT INTO stable_log (upto, state, reason, created) VALUES (?, ?, ?, ?)",
                 (upto, codec.state_json(branch_numbers(conn, "stable")), reason, now))


def put_diff(conn: sqlite3.Connection, diff: Diff, now: float, *, committing: bool) -> None:
    """Store `diff` under its id: the same content again is a no-op, a rebase of it (same id, later base)
    replaces it until it is committed; anything else under a used id raises `InvalidIdError`."""
    body = codec.diff_json(diff)
    row = conn.execute("SELECT d.body, v.number FROM diffs d LEFT JOIN versions v ON v.diff_id = d.id "
                       "WHERE d.id = ?", (diff.id,)).fetchone()
    if row is None:
        conn.execute("INSERT INTO diffs (id, artifact_id, body, created) VALUES (?, ?, ?, ?)",
                     (diff.id, diff.artifact_id, body, now))
        return
    stored, committed_as = row
    if committed_as is not None and (committing or stored != body):
        raise InvalidIdError(f"diff {diff.id!r} is already committed as v{committed_as} of {diff.artifact_id!r}")
    if stored != body:
        if not codec.is_rebase_of(diff, codec.diff_from_json(stored)):
            raise InvalidIdError(f"diff id {diff.id!r} is already used by a different diff")
        conn.execute("UPDATE diffs SET body = ? WHERE id = ?", (body, diff.id))


def put_evidence(conn: sqlite3.Connection, diff_id: str, evidence: Evidence) -> None:
    """Store `evidence` as the evidence of `diff_id`, replacing any earlier one."""
    old = conn.execute("SELECT n_rows FROM evidence WHERE diff_id = ?", (diff_id,)).fetchone()
    if old is not None and old[0]:
        conn.execute("DELETE FROM evidence_rows WHERE diff_id = ?", (diff_id,))
    conn.execute("INSERT OR REPLACE INTO evidence VALUES (?, ?, ?, ?, ?, ?, ?)",
                 codec.evidence_summary(diff_id, evidence))
    conn.executemany("INSERT INTO evidence_rows VALUES (?, ?, ?, ?, ?)", codec.evidence_rows(diff_id, evidence))


def put_decision(conn: sqlite3.Connection, decision: Decision, now: float) -> None:
    """Append `decision` to the log."""
    conn.execute(_INSERT_DECISION, codec.decision_params(decision, now))


def get_diff(conn: sqlite3.Connection, diff_id: str) -> Diff:
    """The stored diff `diff_id` (`UnknownVersionError` if there is none)."""
    row = conn.execute("SELECT body FROM diffs WHERE id = ?", (validate_id(diff_id, what="diff id"),)).fetchone()
    if row is None:
        raise UnknownVersionError(f"unknown diff {diff_id!r}")
    return codec.diff_from_json(row[0])


def get_evidence(conn: sqlite3.Connection, diff_id: str) -> Evidence:
    """The evidence stored with `diff_id`."""
    summary = conn.execute("SELECT base_version, full, cost, tokens, traces FROM evidence WHERE diff_id = ?",
                           (diff_id,)).fetchone()
    if summary is None:
        get_diff(conn, diff_id)
        raise UnknownVersionError(f"diff {diff_id!r} has no evidence stored")
    rows = conn.execute("SELECT task_id, base, candidate FROM evidence_rows WHERE diff_id = ? ORDER BY idx",
                        (diff_id,)).fetchall()
    return codec.evidence_from_rows(summary, rows)


def _where(filters: Sequence[tuple[str, Any]]) -> tuple[str, list[Any]]:
    used = [(column, value) for column, value in filters if value is not None]
    where = " AND ".join(f"{column} = ?" for column, _ in used)
    return (f" WHERE {where}" if where else ""), [v for _, v in used]


def decision_filters(diff_id: str | None, artifact_id: str | None,
                     outcome: Outcome | str | None) -> tuple[tuple[str, Any], ...]:
    """The (column, value) filters of a decision query (None: any)."""
    return (("diff_id", diff_id), ("artifact_id", artifact_id),
            ("outcome", None if outcome is None else Outcome(outcome).value))


def get_decisions(conn: sqlite3.Connection, filters: Sequence[tuple[str, Any]], *, last: bool = False,
                  limit: int | None = None, offset: int = 0) -> list[Decision]:
    """Decisions where every (column, value) of `filters` matches (None values ignored), in log order; a page of
    them with `limit` and `offset`.

    With `last`, only the most recent match (or none).
    """
    where, values = _where(filters)
    sql = f"SELECT {codec.DECISION_COLUMNS} FROM decisions" + where
    if last:
        sql += " ORDER BY seq DESC LIMIT 1"
    else:
        sql += " ORDER BY seq" + ("" if limit is None else " LIMIT ? OFFSET ?")
        values += [] if limit is None else [limit, offset]
    return [codec.decision_from_row(r) for r in conn.execute(sql, values).fetchall()]


def count_decisions(conn: sqlite3.Connection, filters: Sequence[tuple[str, Any]]) -> int:
    """How many decisions match `filters` (as `get_decisions`)."""
    where, values = _where(filters)
    return int(conn.execute("SELECT count(*) FROM decisions" + where, values).fetchone()[0])


def get_standings(conn: sqlite3.Connection, artifact_id: str | None, limit: int | None,
                  offset: int) -> tuple[list[Standing], int]:
    """Every decided diff's latest verdict (in order of its first decision) and how many diffs there are."""
    where, values = _where([("artifact_id", artifact_id)])
    grouped = ("SELECT diff_id, min(seq) AS first, max(seq) AS last, count(*) AS n "
               f"FROM decisions{where} GROUP BY diff_id")
    sql = (f"SELECT d.diff_id, d.artifact_id, d.outcome, g.n FROM ({grouped}) AS g JOIN decisions AS d "
           "ON d.seq = g.last ORDER BY g.first" + ("" if limit is None else " LIMIT ? OFFSET ?"))
    rows = conn.execute(sql, values + ([] if limit is None else [limit, offset])).fetchall()
    total = int(conn.execute(f"SELECT count(DISTINCT diff_id) FROM decisions{where}", values).fetchone()[0])
    return [Standing(r[0], r[1], Outcome(r[2]), int(r[3])) for r in rows], total


def quick_check(conn: sqlite3.Connection, db: Path, git: Path) -> None:
    """SQLite's quick integrity check of the database `db`; `DamagedStoreError` saying what it found if not ok."""
    found = [str(row[0]) for row in conn.execute("PRAGMA quick_check").fetchall()]
    if found != ["ok"]:
        raise DamagedStoreError(f"{db} fails its integrity check ({'; '.join(found[:3])}); restore the run directory "
                                "from a copy, or start a new run directory (the git mirror "
                                f"{git} holds every committed version)")


class Blobs:
    """Texts stored once by content hash, with a bounded cache of the ones read or written lately (cleared whole
    when full: texts are immutable, so a stale entry cannot exist)."""

    SIZE = 512

    def __init__(self) -> None:
        self._texts: dict[str, str] = {}

    def get(self, conn: sqlite3.Connection, text_hash: str) -> str:
        text = self._texts.get(text_hash)
        if text is None:
            text = str(conn.execute("SELECT text FROM blobs WHERE hash = ?", (text_hash,)).fetchone()[0])
            self._remember(text_hash, text)
        return text

    def put(self, conn: sqlite3.Connection, text: str) -> str:
        """Store `text` (once) and return its hash."""
        text_hash = content_hash(text)
        conn.execute("INSERT OR IGNORE INTO blobs (hash, text) VALUES (?, ?)", (text_hash, text))
        self._remember(text_hash, text)
        return text_hash

    def _remember(self, text_hash: str, text: str) -> None:
        if len(self._texts) >= self.SIZE:
            self._texts.clear()
        self._texts[text_hash] = text


def why(c: sqlite3.Connection, diff_id: str) -> dict[str, Any]:
    """A diff, a summary of its evidence, its decisions and its version if any (`SQLiteStore.why`)."""
    diff, evidence = get_diff(c, diff_id), get_evidence(c, diff_id)
    committed = c.execute("SELECT number FROM versions WHERE diff_id = ?", (diff_id,)).fetchone()
    return {"diff": diff.to_dict(), "evidence": codec.summarise(evidence),
            "decisions": [d.to_dict() for d in get_decisions(c, [("diff_id", diff_id)])],
            "version": committed[0] if committed is not None else None}
