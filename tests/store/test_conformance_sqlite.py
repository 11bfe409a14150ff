"""`SQLiteStore` runs the `Store` conformance suite (`conformance.py`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

import pytest

from agentgrad.store.protocol import Store
from agentgrad.store.sqlite import DB_NAME, SQLiteStore
from tests.store.conformance import StoreConformance
from tests.store.conformance_support import Damage, StoreFactory, Tick


def open_sqlite(path: Path) -> Store:
    """The factory: a store without the git mirror (SQLite-specific, tested in test_gitmirror.py), on a fixed clock."""
    store: Store = SQLiteStore(path, git=False, clock=Tick())  # mypy checks that SQLiteStore satisfies Store
    return store


def overwrite_with_garbage(path: Path) -> None:
    """The database file replaced by bytes that are no database at all (a stray write over it)."""
    (path / DB_NAME).write_bytes(b"not a database, just some bytes\n" * 512)


def cut_in_half(path: Path) -> None:
    """The database file truncated to half its length (a crash or a full disk while copying it)."""
    data = (path / DB_NAME).read_bytes()
    (path / DB_NAME).write_bytes(data[: len(data) // 2])


DAMAGE: Mapping[str, Damage] = {"garbage": overwrite_with_garbage, "truncated": cut_in_half}


class TestSQLiteStoreConformance(StoreConformance):
    """The whole suite, on `SQLiteStore`."""

    known_failures: ClassVar[Mapping[str, pytest.MarkDecorator]] = {
    }

    @pytest.fixture
    def store_factory(self) -> StoreFactory:
        return open_sqlite

    @pytest.fixture(params=sorted(DAMAGE))
    def damage_storage(self, request: pytest.FixtureRequest) -> Damage:
        return DAMAGE[str(request.param)]


def test_known_failures_name_tests_of_the_suite() -> None:
    tests = {name for name in dir(StoreConformance) if name.startswith("test_")}
    assert set(TestSQLiteStoreConformance.known_failures) <= tests


def test_sqlite_store_is_a_store_at_runtime(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path, git=False, clock=Tick()) as store:
        assert isinstance(store, Store)
