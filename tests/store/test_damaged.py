"""A run directory whose database is not an agentgrad store (empty, text, cut short, another program's SQLite
file, a directory) is refused on opening with a `DamagedStoreError` naming the file, and nothing is written to it;
a version number past what SQLite can hold is an unknown version, not an OverflowError."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from agentgrad.core.artifact import Artifact, Kind
from agentgrad.errors import DamagedStoreError, UnknownVersionError
from agentgrad.store import tables
from agentgrad.store.events import EventLog
from agentgrad.store.sqlite import SQLiteStore


def _foreign(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.commit()
    conn.close()


def _cut_short(path: Path) -> None:
    with SQLiteStore(path.parent, git=False) as store:
        store.add_artifact(Artifact("skills/a", Kind.SKILL, "- rule\n" * 200))
    data = path.read_bytes()
    for extra in path.parent.glob("agentgrad.db-*"):
        extra.unlink()
    path.write_bytes(data[:len(data) // 2])


DAMAGE: dict[str, tuple[Callable[[Path], object], bool, str]] = {  # how, refused by a writer too, what it says
    "empty file": (lambda p: p.write_bytes(b""), False, "holds no agentgrad store"),
    "text file": (lambda p: p.write_text("hello world\n" * 100), True, "is damaged or is not an agentgrad store"),
    "cut short": (_cut_short, True, "is damaged or is not an agentgrad store"),
    "another SQLite file": (_foreign, True, r"is not an agentgrad store: an SQLite database of something else"),
    "a directory": (lambda p: p.mkdir(), True, "is a directory"),
}


@pytest.mark.parametrize("readonly", [True, False], ids=["reader", "writer"])
@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_database_that_is_no_store_is_refused_on_opening_and_left_as_it_was(tmp_path: Path, damage: str,
                                                                              readonly: bool) -> None:
    make, by_writer, says = DAMAGE[damage]
    db = tmp_path / "agentgrad.db"
    make(db)
    before = db.read_bytes() if db.is_file() else None
    if not readonly and not by_writer:  # an empty file is a new database to a writer
        EventLog(tmp_path).close()
        return
    for open_it in (lambda: SQLiteStore(tmp_path, git=False, readonly=readonly),
                    lambda: EventLog(tmp_path, readonly=readonly)):
        with pytest.raises(DamagedStoreError, match=says) as caught:
            open_it()
        assert str(db) in str(caught.value) and "\n" not in str(caught.value)
    assert (db.read_bytes() if db.is_file() else None) == before


@pytest.mark.parametrize("number", [-1, 2**63, 10**30, True])
def test_a_version_number_sqlite_cannot_hold_is_an_unknown_version(tmp_path: Path, number: int) -> None:
    with SQLiteStore(tmp_path, git=False) as store:
        store.add_artifact(Artifact("skills/a", Kind.SKILL, "- rule\n"))
        with pytest.raises(UnknownVersionError, match=r"^artifact 'skills/a' has no version "):
            store.version("skills/a", number)


def test_a_reader_that_races_the_first_write_of_the_schema_sees_no_store_yet_not_a_foreign_one(
        tmp_path: Path) -> None:
    path = tmp_path / "agentgrad.db"
    writer = sqlite3.connect(str(path), isolation_level=None)
    writer.execute("PRAGMA journal_mode = WAL")
    writer.execute("BEGIN IMMEDIATE")  # a run creating its schema: tables and version commit together
    writer.execute("CREATE TABLE blobs (id TEXT)")
    writer.execute(f"PRAGMA user_version = {tables.SCHEMA_VERSION}")
    reader = sqlite3.connect(str(path), isolation_level=None)

    def commit_between_reads(sql: str) -> None:  # the writer commits after the reader read the version
        if "sqlite_master" in sql and writer.in_transaction:
            writer.execute("COMMIT")

    reader.set_trace_callback(commit_between_reads)
    try:
        assert tables._check_version(reader, path, fresh=True) == 0  # nothing yet, in one snapshot
        assert tables._check_version(reader, path, fresh=True) == tables.SCHEMA_VERSION
    finally:
        reader.close()
        writer.close()
