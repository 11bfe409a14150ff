"""Open diffs: a change in flight is found by its effect, not its id; the state round-trips."""

from __future__ import annotations

import pytest

from agentgrad.core.diff import Diff
from agentgrad.core.ops import Op
from agentgrad.errors import StateDictError
from agentgrad.runtime.opendiffs import OpenDiffs


def _diff(rule: str, author: str) -> Diff:
    return Diff("skill", 0, (Op.add("rule", rule),), author=author)


def test_an_open_change_is_found_whoever_proposes_it_again_until_its_verdict() -> None:
    open_ = OpenDiffs()
    first, again = _diff("- a: use method 1", "w1"), _diff("- a: use method 1", "w2")
    assert first.id != again.id
    open_.hold([first])
    assert open_.twin(again) == first.id and first.id in open_ and len(open_) == 1
    assert open_.drop(first.id) == first and open_.twin(again) is None and len(open_) == 0
    assert open_.drop(first.id) is None


def test_the_open_diffs_round_trip_and_bad_state_changes_nothing() -> None:
    open_ = OpenDiffs()
    open_.hold([_diff("- a: use method 1", "w1"), _diff("- b: use method 2", "w1")])
    copy = OpenDiffs()
    copy.load_state_dict(open_.state_dict())
    assert copy.state_dict() == open_.state_dict() and len(copy) == 2
    with pytest.raises(StateDictError):
        copy.load_state_dict({"open": "nope"})
    assert copy.state_dict() == open_.state_dict()


def test_a_diff_is_born_on_the_version_it_was_first_held_on_and_a_resumed_run_does_not_know_it() -> None:
    open_ = OpenDiffs()
    diff = _diff("- a: use method 1", "w1")
    open_.hold([diff])
    open_.hold([Diff(diff.artifact_id, 4, diff.ops, author="w1", id=diff.id)])  # held again, rebased
    assert open_.born(diff.id) == 0
    copy = OpenDiffs()
    copy.load_state_dict(open_.state_dict())
    copy.hold([Diff(diff.artifact_id, 5, diff.ops, author="w1", id=diff.id)])
    assert copy.born(diff.id) is None
    open_.drop(diff.id)
    assert open_.born(diff.id) is None


def test_a_diff_held_again_after_a_verdict_that_is_not_final_keeps_the_version_it_was_born_on() -> None:
    """A held candidate is dropped and held again at every step, rebased when the head moved: it must still be
    known as born on the version its origin task was picked on for failing (before, it took the rebased version,
    and the version it was proposed on could serve as a fresh context for its replication)."""
    open_ = OpenDiffs()
    diff = Diff("skill", 1, (Op.add("rule", "- a: use method 1"),), author="w1")
    open_.hold([diff])
    rebased = Diff("skill", 2, diff.ops, author="w1", id=diff.id)
    assert open_.drop(diff.id, final=False) == diff
    open_.hold([rebased])
    assert open_.born(diff.id) == 1
    open_.drop(diff.id)
    open_.hold([rebased])  # a final verdict forgets it: the same id held afresh is born on its base
    assert open_.born(diff.id) == 2


def test_a_shelved_diff_stays_open_but_no_longer_counts_as_worked_on_until_held_again() -> None:
    open_ = OpenDiffs()
    first, second = _diff("- a: use method 1", "w1"), _diff("- b: use method 2", "w1")
    open_.hold([first, second])
    open_.shelve(first.id)
    open_.shelve("not-open")
    assert len(open_) == 2 and open_.active == 1 and first.id in open_
    open_.hold([first])
    assert open_.active == 2
    open_.shelve(first.id)
    open_.drop(first.id)
    assert len(open_) == 1 and open_.active == 1
