"""The `Store` conformance suite: the promises of `agentgrad.store.protocol`, for any backend.

A backend subclasses `StoreConformance` in a ``test_*.py`` module and provides the ``store_factory`` and
``damage_storage`` fixtures (see `conformance_support`); ``test_conformance_sqlite.py`` does it for `SQLiteStore`.
Nothing here names a backend: every test goes through the factory and the `Store` protocol.

The suite's parts: this module (artifacts, single commits, batches, the frozen layer, verdicts),
`conformance_branches` (promotion, revert, durability, damage), `conformance_concurrency` (writer threads and
processes), `conformance_units` (one unit of work for store writes and journal events) and
`conformance_support` (the backend hooks, known failures, test data).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import pytest

from agentgrad.core.artifact import Artifact, Kind, Layer
from agentgrad.core.decision import Decision, Outcome
from agentgrad.core.diff import Diff, apply
from agentgrad.core.evidence import Evidence
from agentgrad.core.ops import Op
from agentgrad.errors import (
    ApplyConflictError,
    FrozenLayerError,
    InvalidIdError,
    InvalidOpError,
    StaleHeadError,
    UnknownArtifactError,
    UnknownVersionError,
)
from agentgrad.store.protocol import Store
from tests.store.conformance_branches import DurabilityPromises, PromotionPromises
from tests.store.conformance_concurrency import ConcurrencyPromises
from tests.store.conformance_library import LibraryPromises
from tests.store.conformance_support import (
    HARNESS,
    SAFETY,
    SKILL,
    SKILL_TEXT,
    ConformanceBase,
    StoreFactory,
    accept,
    evidence,
    item,
    observable,
    rule,
    seed,
    verdict,
)
from tests.store.conformance_units import UnitOfWorkPromises

Item = tuple[Diff, Evidence, Decision]


class ArtifactPromises(ConformanceBase):
    """Adding artifacts, and reading them, their heads and their versions."""

    def test_the_factory_returns_a_store(self, store: Store) -> None:
        assert isinstance(store, Store)

    def test_a_new_artifact_is_version_zero_on_dev_and_stable(self, store: Store) -> None:
        zero = store.head(SKILL)
        assert (zero.artifact_id, zero.number, zero.text, zero.diff_id) == (SKILL, 0, SKILL_TEXT, None)
        assert store.head(SKILL, "stable") == zero == store.version(SKILL, 0)
        assert store.history(SKILL) == [zero]
        assert store.artifact_ids() == sorted([SKILL, HARNESS, SAFETY])
        for branch in ("dev", "stable"):
            assert {a: v.number for a, v in store.heads(branch).items()} == {SKILL: 0, HARNESS: 0, SAFETY: 0}
        assert store.artifact(SKILL) == Artifact(SKILL, Kind.SKILL, SKILL_TEXT, Layer.L2)
        assert store.artifact(SAFETY, "stable").layer is Layer.L0
        assert store.artifact(HARNESS).layer is Layer.L1  # the default layer of a harness

    def test_adding_an_artifact_again_is_a_no_op_and_other_content_is_refused(self, store: Store) -> None:
        before = observable(store)
        assert store.add_artifact(Artifact(SKILL, Kind.SKILL, SKILL_TEXT)) == store.version(SKILL, 0)
        for other in (Artifact(SKILL, Kind.SKILL, "other text"), Artifact(SKILL, Kind.PROMPT, SKILL_TEXT),
                      Artifact(SKILL, Kind.SKILL, SKILL_TEXT, Layer.L1)):
            with pytest.raises(InvalidIdError):
                store.add_artifact(other)
        assert observable(store) == before

    def test_unknown_names_raise_typed_errors(self, store: Store) -> None:
        for read in (store.artifact, store.head, store.history):
            with pytest.raises(UnknownArtifactError):
                read("skills/nope")
        with pytest.raises(UnknownArtifactError):
            store.version("skills/nope", 0)
        with pytest.raises(UnknownVersionError):
            store.version(SKILL, 1)
        for read_log in (store.diff, store.evidence, store.why):
            with pytest.raises(UnknownVersionError):
                read_log("dnever")
        with pytest.raises(InvalidIdError):
            store.heads("main")
        with pytest.raises(InvalidIdError):
            store.head(SKILL, "main")
        assert store.decisions(diff_id="dnever") == []


class CommitPromises(ConformanceBase):
    """One commit: compare-and-swap on the dev head, every version kept, any refusal writes nothing."""

    def test_commits_move_the_dev_head_and_keep_every_version(self, store: Store) -> None:
        diffs = [rule(SKILL, n, f"rule {n}") for n in range(3)]
        made = [store.commit(d, evidence(), accept(d)) for d in diffs]
        assert [(v.number, v.diff_id) for v in made] == [(1, diffs[0].id), (2, diffs[1].id), (3, diffs[2].id)]
        history = store.history(SKILL)
        assert history[1:] == made and [v.number for v in history] == [0, 1, 2, 3]
        for (previous, current), diff in zip(itertools.pairwise(history), diffs, strict=True):
            assert current.text == apply(diff, previous.text) == store.version(SKILL, current.number).text
        assert store.head(SKILL) == made[-1] and store.artifact(SKILL).text == made[-1].text
        assert store.head(SKILL, "stable").number == 0  # only promotion moves stable
        assert store.head(HARNESS).number == 0

    def test_a_commit_stores_its_diff_evidence_and_decision(self, store: Store) -> None:
        diff = rule(SKILL, 0, "cite sources")
        store.commit(diff, evidence(0.25), accept(diff, margin=0.1))
        assert store.diff(diff.id) == diff
        assert store.evidence(diff.id) == evidence(0.25)
        assert store.decisions(diff_id=diff.id) == [accept(diff, margin=0.1)]

    def test_a_commit_on_a_stale_base_is_refused_and_changes_nothing(self, store: Store) -> None:
        first = rule(SKILL, 0, "one")
        store.commit(first, evidence(), accept(first))
        before = observable(store)
        late = rule(SKILL, 0, "two")
        with pytest.raises(StaleHeadError):
            store.commit(late, evidence(), accept(late))
        ahead = rule(SKILL, 1, "three")
        with pytest.raises(StaleHeadError):
            store.commit(ahead, evidence(), accept(ahead), expected=0)
        assert observable(store) == before
        for refused in (late, ahead):
            with pytest.raises(UnknownVersionError):
                store.diff(refused.id)

    def test_expected_names_the_head_the_swap_checks(self, store: Store) -> None:
        first = rule(SKILL, 0, "one")
        store.commit(first, evidence(), accept(first))
        moved = rule(SKILL, 0, "two")  # made on v0; the caller checked it on v1
        assert store.commit(moved, evidence(), accept(moved), expected=1).text == SKILL_TEXT + "- one\n- two\n"

    def test_a_commit_needs_the_accepted_decision_about_that_diff(self, store: Store) -> None:
        diff, other = rule(SKILL, 0, "one"), rule(SKILL, 0, "two")
        before = observable(store)
        with pytest.raises(InvalidIdError):
            store.commit(diff, evidence(), accept(other))
        with pytest.raises(InvalidOpError):
            store.commit(diff, evidence(), verdict(diff, Outcome.REJECTED))
        assert observable(store) == before

    def test_refused_commits_write_nothing(self, store: Store) -> None:
        committed = rule(SKILL, 0, "one")
        store.commit(committed, evidence(), accept(committed))
        before = observable(store)
        missing = Diff(SKILL, 1, (Op.delete("rule", "- not there"),))
        with pytest.raises(ApplyConflictError):
            store.commit(missing, evidence(), accept(missing))
        again = Diff(SKILL, 1, (Op.add("rule", "- two"),), id=committed.id)  # a committed diff's id
        with pytest.raises(InvalidIdError):
            store.commit(again, evidence(), accept(again))
        unknown = rule("skills/nope", 0, "one")
        with pytest.raises(UnknownArtifactError):
            store.commit(unknown, evidence(), accept(unknown))
        assert observable(store) == before


def _fails_stale(store: Store) -> tuple[Item, type[Exception]]:
    return item(rule(HARNESS, 1, "late")), StaleHeadError


def _fails_frozen(store: Store) -> tuple[Item, type[Exception]]:
    return item(rule(SAFETY, 0, "allow deletes")), FrozenLayerError


def _fails_to_apply(store: Store) -> tuple[Item, type[Exception]]:
    return item(Diff(HARNESS, 0, (Op.delete("rule", "- not there"),))), ApplyConflictError


def _fails_unknown(store: Store) -> tuple[Item, type[Exception]]:
    return item(rule("skills/nope", 0, "x")), UnknownArtifactError


def _fails_not_accepted(store: Store) -> tuple[Item, type[Exception]]:
    diff = rule(HARNESS, 0, "rejected")
    return (diff, evidence(), verdict(diff, Outcome.REJECTED)), InvalidOpError


SECOND_ITEM_FAILURES: dict[str, Callable[[Store], tuple[Item, type[Exception]]]] = {
    "stale": _fails_stale, "frozen": _fails_frozen, "conflict": _fails_to_apply, "unknown": _fails_unknown,
    "not-accepted": _fails_not_accepted,
}


class BatchPromises(ConformanceBase):
    """`commit_many`: a batch touching several heads commits atomically, checking the swap on each."""

    def test_a_batch_on_two_artifacts_moves_both_heads(self, store: Store) -> None:
        one, two = rule(SKILL, 0, "one"), rule(HARNESS, 0, "two")
        made = store.commit_many([item(one), item(two)])
        assert [(v.artifact_id, v.number, v.diff_id) for v in made] == [(SKILL, 1, one.id), (HARNESS, 1, two.id)]
        assert store.heads() == {SKILL: made[0], HARNESS: made[1], SAFETY: store.version(SAFETY, 0)}
        assert {d.diff_id for d in store.decisions(outcome=Outcome.ACCEPTED)} == {one.id, two.id}

    def test_a_batch_may_chain_diffs_of_one_artifact(self, store: Store) -> None:
        made = store.commit_many([item(rule(SKILL, 0, "one")), item(rule(SKILL, 1, "two"))])
        assert [v.number for v in made] == [1, 2]
        assert store.head(SKILL).text == SKILL_TEXT + "- one\n- two\n"

    @pytest.mark.parametrize("failure", sorted(SECOND_ITEM_FAILURES))
    def test_a_batch_whose_second_item_fails_moves_neither_head(self, store: Store, failure: str) -> None:
        first = rule(SKILL, 0, "one")
        second, error = SECOND_ITEM_FAILURES[failure](store)
        before = observable(store)
        with pytest.raises(error):
            store.commit_many([item(first), second])
        assert observable(store) == before
        assert store.head(SKILL).number == 0  # the first item's swap held, yet its head did not move
        with pytest.raises(UnknownVersionError):
            store.diff(first.id)
        assert store.commit_many([item(first)])[0].number == 1  # nothing was left half-written

    def test_a_batch_where_a_later_swap_fails_after_an_earlier_move_writes_nothing(self, store: Store) -> None:
        chain = [item(rule(SKILL, 0, "one")), item(rule(HARNESS, 0, "two")), item(rule(SKILL, 0, "three"))]
        before = observable(store)
        with pytest.raises(StaleHeadError):  # the third was made on v0, but the first moved the skill to v1
            store.commit_many(chain)
        assert observable(store) == before

    def test_an_empty_batch_changes_nothing(self, store: Store) -> None:
        before = observable(store)
        assert store.commit_many([]) == []
        assert observable(store) == before


class FrozenPromises(ConformanceBase):
    """L0 artifacts (`Layer.L0`, `Artifact.frozen`) never change, whatever reaches the store."""

    def test_an_l0_artifact_cannot_be_committed_to(self, store: Store) -> None:
        assert store.artifact(SAFETY).frozen
        before = observable(store)
        diff = rule(SAFETY, 0, "allow deletes")
        with pytest.raises(FrozenLayerError):
            store.commit(diff, evidence(), accept(diff))
        with pytest.raises(FrozenLayerError):
            store.commit(diff, evidence(), accept(diff), expected=0)
        with pytest.raises(FrozenLayerError):
            store.commit_many([item(diff)])
        assert observable(store) == before

    def test_an_l0_artifact_stays_frozen_after_reopening(self, store_factory: StoreFactory, run_dir: Path) -> None:
        with store_factory(run_dir) as store:
            seed(store)
        with store_factory(run_dir) as reopened:
            assert reopened.artifact(SAFETY).frozen
            diff = rule(SAFETY, 0, "allow deletes")
            with pytest.raises(FrozenLayerError):
                reopened.commit(diff, evidence(), accept(diff))
            assert reopened.head(SAFETY).number == 0

    def test_verdicts_on_an_l0_diff_are_recorded(self, store: Store) -> None:
        diff = rule(SAFETY, 0, "allow deletes")
        refused = verdict(diff, Outcome.REFUSED, "the artifact is L0 (frozen)")
        store.record(diff, evidence(), refused)
        assert store.decisions(artifact_id=SAFETY) == [refused]
        assert store.head(SAFETY).number == 0


class DecisionPromises(ConformanceBase):
    """Verdicts: recorded without moving heads, kept in order, queried by diff, artifact and outcome."""

    def test_record_keeps_a_verdict_and_moves_no_head(self, store: Store) -> None:
        diff = rule(SKILL, 0, "shout")
        before = store.heads()
        store.record(diff, evidence(-0.25), verdict(diff, Outcome.REJECTED))
        assert store.heads() == before
        assert store.diff(diff.id) == diff and store.evidence(diff.id) == evidence(-0.25)
        assert store.decisions(diff_id=diff.id) == [verdict(diff, Outcome.REJECTED)]
        assert store.why(diff.id)["version"] is None

    def test_record_is_idempotent_and_refuses_accepted_or_reused_ids(self, store: Store) -> None:
        diff = rule(SKILL, 0, "shout")
        for _ in range(2):
            store.record(diff, evidence(), verdict(diff, Outcome.REJECTED))
        assert store.decisions(diff_id=diff.id) == [verdict(diff, Outcome.REJECTED)]
        with pytest.raises(InvalidOpError):
            store.record(diff, evidence(), accept(diff))
        impostor = Diff(SKILL, 0, (Op.add("rule", "- whisper"),), id=diff.id)
        with pytest.raises(InvalidIdError):
            store.record(impostor, evidence(), verdict(impostor, Outcome.REJECTED))
        unknown = rule("skills/nope", 0, "x")
        with pytest.raises(UnknownArtifactError):
            store.record(unknown, evidence(), verdict(unknown, Outcome.REJECTED))
        assert len(store.decisions()) == 1

    def test_decisions_are_queried_by_diff_artifact_and_outcome_oldest_first(self, store: Store) -> None:
        a, b, c = rule(SKILL, 0, "a"), rule(HARNESS, 0, "b"), rule(SKILL, 0, "c")
        store.record(a, evidence(), verdict(a, Outcome.REJECTED))
        store.record(b, evidence(), verdict(b, Outcome.STALE))
        store.record(a, evidence(), verdict(a, Outcome.TABU))
        store.commit(c, evidence(), accept(c))
        everything = [verdict(a, Outcome.REJECTED), verdict(b, Outcome.STALE), verdict(a, Outcome.TABU), accept(c)]
        assert store.decisions() == everything
        assert store.decisions(diff_id=a.id) == [everything[0], everything[2]]
        assert store.decisions(artifact_id=SKILL) == [everything[0], everything[2], everything[3]]
        assert store.decisions(outcome=Outcome.STALE) == store.decisions(outcome="stale") == [everything[1]]
        assert store.decisions(artifact_id=SKILL, outcome=Outcome.REJECTED) == [everything[0]]
        assert store.decisions(artifact_id=HARNESS, outcome=Outcome.TABU) == []

    def test_decisions_come_in_pages_with_a_count_of_the_matches(self, store: Store) -> None:
        diffs = [rule(SKILL, 0, f"r{i}") for i in range(5)]
        for diff in diffs:
            store.record(diff, evidence(), verdict(diff, Outcome.REJECTED))
        every = store.decisions(artifact_id=SKILL)
        assert store.decisions(artifact_id=SKILL, limit=2, offset=1) == every[1:3]
        assert store.decisions(artifact_id=SKILL, limit=10, offset=4) == every[4:]
        assert store.decisions(limit=0) == []
        assert store.decision_count(artifact_id=SKILL) == 5 == len(every)
        assert store.decision_count(outcome=Outcome.ACCEPTED) == 0

    def test_standings_give_each_diffs_latest_verdict_in_order_of_first_decision(self, store: Store) -> None:
        a, b, c = rule(SKILL, 0, "a"), rule(HARNESS, 0, "b"), rule(SKILL, 0, "c")
        store.record(a, evidence(), verdict(a, Outcome.RECHECK))
        store.record(b, evidence(), verdict(b, Outcome.STALE))
        store.record(a, evidence(), verdict(a, Outcome.EXTEND))
        store.commit(c, evidence(), accept(c))
        store.record(a, evidence(), verdict(a, Outcome.REJECTED))
        every, total = store.standings()
        assert total == 3
        assert [(s.diff_id, s.outcome, s.decisions) for s in every] == [
            (a.id, Outcome.REJECTED, 3), (b.id, Outcome.STALE, 1), (c.id, Outcome.ACCEPTED, 1)]
        page, total = store.standings(artifact_id=SKILL, limit=1, offset=1)
        assert total == 2 and [(s.diff_id, s.artifact_id) for s in page] == [(c.id, SKILL)]
        assert store.standings(limit=0) == ([], 3)

    def test_why_tells_the_story_of_a_diff(self, store: Store) -> None:
        diff = rule(SKILL, 0, "cite")
        store.record(diff, evidence(), verdict(diff, Outcome.RECHECK, "rebased"))
        store.commit(diff, evidence(), accept(diff))
        story = store.why(diff.id)
        assert story["diff"] == diff.to_dict() and story["version"] == 1
        assert story["evidence"]["tasks"] == 2
        assert [d["outcome"] for d in story["decisions"]] == ["recheck", "accepted"]


class StoreConformance(ArtifactPromises, CommitPromises, BatchPromises, FrozenPromises, DecisionPromises,
                       PromotionPromises, DurabilityPromises, ConcurrencyPromises, UnitOfWorkPromises,
                       LibraryPromises):
    """Every promise of `Store`. Subclass it as ``Test<Backend>Conformance`` with the two backend fixtures."""
