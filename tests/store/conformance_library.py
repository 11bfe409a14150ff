"""Conformance: a library's members follow its packed artifact (one transaction, compare-and-swap per member)."""

from __future__ import annotations

import pytest

from agentgrad.core.artifact import Artifact, Kind
from agentgrad.core.diff import Diff
from agentgrad.core.library import Library, unpack
from agentgrad.core.ops import Op
from agentgrad.errors import StaleHeadError
from agentgrad.store.members import member_diff_id
from agentgrad.store.protocol import Store
from tests.store.conformance_support import ConformanceBase, accept, evidence, rule


def _library(store: Store) -> Library:
    lib = Library.of([Artifact("system", Kind.PROMPT, "Be brief.\n"), Artifact("tips", Kind.SKILL, "")])
    with store.transaction():
        for member in lib:
            store.add_artifact(member)
        store.add_artifact(lib.packed())
    return lib


def _both(base: int = 0) -> Diff:
    return Diff("library", base, (Op.add("rule", "- show the work").within("tips"),
                                  Op.replace("text", "Be brief.\n", "Be kind.\n").within("system")), author="w1")


class LibraryPromises(ConformanceBase):
    """Commits of a packed library commit each member they touch, atomically."""

    def test_a_library_commit_commits_every_member_it_touches(self, store: Store) -> None:
        _library(store)
        diff = _both()
        version = store.commit(diff, evidence(), accept(diff))
        assert version.number == 1
        assert store.artifact("tips").text == "- show the work\n"
        assert store.artifact("system").text == "Be kind.\n"
        assert unpack(store.artifact("library").text) == {"system": "Be kind.\n", "tips": "- show the work\n"}
        part = store.history("tips")[-1]
        assert part.diff_id == member_diff_id(diff.id, "tips")
        assert store.diff(part.diff_id).ops == (Op.add("rule", "- show the work"),)

    def test_a_member_the_change_does_not_touch_keeps_its_version(self, store: Store) -> None:
        _library(store)
        diff = Diff("library", 0, (Op.add("rule", "- a").within("tips"),))
        store.commit(diff, evidence(), accept(diff))
        assert store.head("system").number == 0 and store.head("tips").number == 1

    def test_a_member_written_outside_the_library_fails_the_whole_commit(self, store: Store) -> None:
        _library(store)
        outside = rule("tips", 0, "- sneaked in")
        store.commit(outside, evidence(), accept(outside))
        diff = _both()
        with pytest.raises(StaleHeadError, match="tips"):
            store.commit(diff, evidence(), accept(diff))
        assert store.head("library").number == 0
        assert store.head("system").number == 0  # nothing of the change landed

    def test_promoting_the_library_promotes_its_members_at_that_version(self, store: Store) -> None:
        _library(store)
        first = _both()
        store.commit(first, evidence(), accept(first))
        second = Diff("library", 1, (Op.add("rule", "- b").within("tips"),))
        store.commit(second, evidence(), accept(second))
        store.promote_to({"library": 1})
        stable = store.heads("stable")
        assert stable["library"].number == 1
        assert stable["tips"].text == "- show the work\n" and stable["system"].text == "Be kind.\n"
