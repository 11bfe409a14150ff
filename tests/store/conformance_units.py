"""Conformance: one unit of work (`Store.transaction`) groups store writes and `journal` events, all or nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentgrad.errors import StaleHeadError
from agentgrad.store.protocol import Journal, Store
from tests.store.conformance_support import HARNESS, SKILL, StoreFactory, item, rule, seed


class UnitOfWorkPromises:
    """`transaction` and `journal`."""

    def test_the_journal_is_a_journal(self, store: Store) -> None:
        assert isinstance(store.journal, Journal)

    def test_a_unit_commits_its_versions_events_and_documents_together(self, store: Store,
                                                                       store_factory: StoreFactory,
                                                                       run_dir: Path) -> None:
        seed(store)
        with store.transaction():
            store.commit_many([item(rule(SKILL, 0, "a")), item(rule(HARNESS, 0, "b"))])
            store.journal.append("commit", {"n": 2})
            store.journal.put("checkpoint", {"step": 1})
        with store_factory(run_dir) as other:
            assert (other.head(SKILL).number, other.head(HARNESS).number) == (1, 1)
            assert [e.payload for e in other.journal.read(["commit"])] == [{"n": 2}]
            assert other.journal.get("checkpoint") == {"step": 1}

    def test_a_unit_that_raises_leaves_none_of_it(self, store: Store) -> None:
        seed(store)
        before = store.heads()
        with pytest.raises(RuntimeError, match="died mid-step"), store.transaction():
            store.commit_many([item(rule(SKILL, 0, "a"))])
            store.journal.append("commit", {"n": 1})
            store.journal.put("checkpoint", {"step": 1})
            raise RuntimeError("died mid-step")
        assert store.heads() == before
        assert store.journal.count("commit") == 0 and store.journal.get("checkpoint") is None

    def test_a_failed_write_inside_a_unit_undoes_only_itself(self, store: Store) -> None:
        seed(store)
        with store.transaction():
            store.journal.append("note", {"n": 1})
            with pytest.raises(StaleHeadError):
                store.commit_many([item(rule(SKILL, 0, "a")), item(rule(HARNESS, 7, "b"))])
            store.commit_many([item(rule(HARNESS, 0, "c"))])
        assert (store.head(SKILL).number, store.head(HARNESS).number) == (0, 1)
        assert store.journal.count("note") == 1

    def test_other_openers_see_nothing_of_a_unit_before_it_ends(self, store: Store, store_factory: StoreFactory,
                                                               run_dir: Path) -> None:
        seed(store)
        with store_factory(run_dir) as other, store.transaction():
            store.journal.append("note", {"n": 1})
            store.commit_many([item(rule(SKILL, 0, "a"))])
            assert other.journal.count("note") == 0 and other.head(SKILL).number == 0
