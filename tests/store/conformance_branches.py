"""The `Store` conformance suite, part two: the stable branch (promotion, revert) and durability.

See `conformance.py`, which gathers every part into `StoreConformance`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentgrad.core.artifact import Version
from agentgrad.core.decision import Outcome
from agentgrad.core.diff import Diff, apply, invert
from agentgrad.errors import AgentgradError, InvalidOpError, StaleHeadError, UnknownArtifactError, UnknownVersionError
from agentgrad.store.protocol import Store
from tests.store.conformance_support import (
    HARNESS,
    SAFETY,
    SKILL,
    SKILL_TEXT,
    ConformanceBase,
    Damage,
    StoreFactory,
    accept,
    evidence,
    item,
    observable,
    rule,
    seed,
    verdict,
)


class PromotionPromises(ConformanceBase):
    """The stable branch: moved only by promotion, never back; reverts are new dev commits."""

    def _commit(self, store: Store, artifact_id: str, count: int) -> list[Version]:
        start = store.head(artifact_id).number
        diffs = [rule(artifact_id, start + n, f"{artifact_id} {start + n}") for n in range(count)]
        return [store.commit(d, evidence(), accept(d)) for d in diffs]

    def test_promote_sets_stable_to_dev(self, store: Store) -> None:
        self._commit(store, SKILL, 2)
        self._commit(store, HARNESS, 1)
        assert store.promote([SKILL]) == {SKILL: 2}
        assert store.head(SKILL, "stable") == store.head(SKILL) and store.head(HARNESS, "stable").number == 0
        assert store.artifact(SKILL, "stable").text == store.artifact(SKILL).text
        assert store.promote() == {SKILL: 2, HARNESS: 1, SAFETY: 0}
        assert store.heads("stable") == store.heads("dev")

    def test_promote_with_a_stale_check_or_unknown_id_changes_nothing(self, store: Store) -> None:
        self._commit(store, SKILL, 2)
        before = observable(store)
        with pytest.raises(StaleHeadError):
            store.promote([SKILL], expected={SKILL: 1})
        with pytest.raises(UnknownArtifactError):
            store.promote([SKILL, "skills/nope"])
        assert observable(store) == before
        assert store.promote([SKILL], expected={SKILL: 2}) == {SKILL: 2}

    def test_promote_to_a_checked_version_never_back(self, store: Store) -> None:
        self._commit(store, SKILL, 3)
        assert store.promote_to({SKILL: 2}) == {SKILL: 2}
        assert store.head(SKILL, "stable") == store.version(SKILL, 2)
        before = observable(store)
        with pytest.raises(StaleHeadError):
            store.promote_to({SKILL: 1})
        with pytest.raises(UnknownVersionError):
            store.promote_to({SKILL: 4})
        with pytest.raises(UnknownArtifactError):
            store.promote_to({"skills/nope": 0})
        assert observable(store) == before

    def test_revert_commit_adds_the_inverse_and_records_reverted(self, store: Store) -> None:
        first, _ = self._commit(store, SKILL, 2)
        original = store.diff(first.diff_id or "")
        inverse = Diff(SKILL, 2, invert(original, store.version(SKILL, 0).text).ops, rationale="undo")
        made = store.revert_commit(original.id, inverse, reason="held-out score fell", numbers={"loss": 0.1})
        assert made.number == 3 and made.text == apply(inverse, store.version(SKILL, 2).text)
        assert [d.outcome for d in store.decisions(diff_id=original.id)] == [Outcome.ACCEPTED, Outcome.REVERTED]
        assert [d.outcome for d in store.decisions(diff_id=inverse.id)] == [Outcome.ACCEPTED]
        assert store.head(SKILL, "stable").number == 0
        with pytest.raises(InvalidOpError):  # already reverted
            store.revert_commit(original.id, Diff(SKILL, 3, inverse.ops), reason="again")

    def test_revert_commit_refusals_change_nothing(self, store: Store) -> None:
        (first,) = self._commit(store, SKILL, 1)
        original = store.diff(first.diff_id or "")
        inverse = Diff(SKILL, 1, invert(original, SKILL_TEXT).ops)
        before = observable(store)
        with pytest.raises(StaleHeadError):
            store.revert_commit(original.id, inverse, reason="late", expected=0)
        assert observable(store) == before
        recorded = rule(SKILL, 1, "never committed")
        store.record(recorded, evidence(), verdict(recorded, Outcome.REJECTED))
        before = observable(store)
        with pytest.raises(UnknownVersionError):
            store.revert_commit(recorded.id, inverse, reason="not committed")
        with pytest.raises(InvalidOpError):
            store.revert_commit(original.id, Diff(HARNESS, 0, inverse.ops), reason="other artifact")
        assert observable(store) == before


class DurabilityPromises(ConformanceBase):
    """What a write returned for is there for every other opener, and after reopening; damage is a typed error."""

    def test_reopening_sees_everything(self, store_factory: StoreFactory, run_dir: Path) -> None:
        kept, dropped = rule(SKILL, 0, "kept"), rule(SKILL, 1, "dropped")
        with store_factory(run_dir) as store:
            seed(store)
            store.commit_many([item(kept), item(rule(HARNESS, 0, "also kept"))])
            store.record(dropped, evidence(-0.5), verdict(dropped, Outcome.REJECTED))
            store.promote([SKILL])
            seen = observable(store)
        with store_factory(run_dir) as reopened:
            assert observable(reopened) == seen
            assert reopened.diff(dropped.id) == dropped and reopened.evidence(kept.id) == evidence()
            assert reopened.why(kept.id)["version"] == 1
            reopened.commit(rule(SKILL, 1, "after reopening"), evidence(), accept(rule(SKILL, 1, "after reopening")))
        with store_factory(run_dir) as again:
            assert again.head(SKILL).number == 2

    def test_another_store_on_the_same_path_sees_each_write_at_once(self, store_factory: StoreFactory,
                                                                      run_dir: Path, store: Store) -> None:
        with store_factory(run_dir) as other:
            diff = rule(SKILL, 0, "one")
            store.commit(diff, evidence(), accept(diff))
            assert other.head(SKILL) == store.head(SKILL)
            late = rule(SKILL, 0, "late")
            with pytest.raises(StaleHeadError):  # the other store's swap sees the first store's commit
                other.commit(late, evidence(), accept(late))
            other.promote()
            assert store.heads("stable") == other.heads("stable")

    def test_damaged_storage_raises_a_typed_error(self, store_factory: StoreFactory, damage_storage: Damage,
                                                  run_dir: Path) -> None:
        with store_factory(run_dir) as store:
            seed(store)
            store.commit_many([item(rule(SKILL, n, f"rule {n}")) for n in range(20)])
        damage_storage(run_dir)
        with pytest.raises(AgentgradError) as raised, store_factory(run_dir) as damaged:
            observable(damaged)
            for number in range(21):
                damaged.version(SKILL, number)
        assert str(raised.value)
