"""The SQLite store: round trips of everything stored, compare-and-swap, refusals that write nothing, revert."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgrad.core.artifact import Artifact, Kind, Layer
from agentgrad.core.decision import Decision, Outcome
from agentgrad.core.diff import Diff, apply, fingerprint
from agentgrad.core.evidence import Evidence, Row
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
from agentgrad.store.sqlite import SQLiteStore

AID = "skills/style"
TEXT = "# Style\n- be brief\n"


class Tick:
    """A deterministic clock: 1000.0, 1001.0, ..."""

    def __init__(self) -> None:
        self.now = 999.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def evidence(delta: float = 0.5) -> Evidence:
    return Evidence.paired({"t1": 0.5, "t2": 0.5}, {"t1": 0.5 + delta, "t2": 0.5 + delta / 2})


def accept(diff: Diff, p: float = 0.99) -> Decision:
    return Decision(diff.id, diff.artifact_id, Outcome.ACCEPTED, "accept", "reason", {"p": p})


def rule_diff(base: int, rule: str, artifact: str = AID) -> Diff:
    return Diff(artifact, base, (Op.add("rule", f"- {rule}"),), author="w1", rationale=f"add {rule}")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    with SQLiteStore(tmp_path / "run", git=False, clock=Tick()) as opened:
        opened.add_artifact(Artifact(AID, Kind.SKILL, TEXT))
        yield opened


def row_count(store: SQLiteStore, table: str) -> int:
    with sqlite3.connect(store.run_dir / "agentgrad.db") as conn:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def table_counts(store: SQLiteStore) -> dict[str, int]:
    tables = ("blobs", "artifacts", "versions", "diffs", "evidence", "evidence_rows", "decisions", "heads")
    return {t: row_count(store, t) for t in tables}


def test_new_artifact_is_version_zero_on_dev_and_stable(store: SQLiteStore) -> None:
    for branch in ("dev", "stable"):
        head = store.head(AID, branch)
        assert (head.number, head.text, head.diff_id) == (0, TEXT, None)
    assert store.artifact(AID) == Artifact(AID, Kind.SKILL, TEXT, Layer.L2)
    assert store.artifact_ids() == [AID]


def test_adding_the_same_artifact_again_is_a_no_op(store: SQLiteStore) -> None:
    before = table_counts(store)
    assert store.add_artifact(Artifact(AID, Kind.SKILL, TEXT)).number == 0
    assert table_counts(store) == before


@pytest.mark.parametrize("other", [Artifact(AID, Kind.SKILL, TEXT + "- more\n"), Artifact(AID, Kind.PROMPT, TEXT),
                                   Artifact(AID, Kind.SKILL, TEXT, Layer.L1)])
def test_adding_an_id_again_with_other_content_is_refused(store: SQLiteStore, other: Artifact) -> None:
    with pytest.raises(InvalidIdError, match="already exists"):
        store.add_artifact(other)
    assert store.artifact(AID).text == TEXT


@pytest.mark.parametrize("first, second", [("a", "a/b"), ("a/b", "a"), ("x/y/z", "x/y"), ("x/y", "x/y/z/w")])
def test_ids_that_would_be_file_and_directory_at_once_are_refused(tmp_path: Path, first: str, second: str) -> None:
    with SQLiteStore(tmp_path, git=False) as store:
        store.add_artifact(Artifact(first, Kind.SKILL, "x\n"))
        with pytest.raises(InvalidIdError, match="clashes"):
            store.add_artifact(Artifact(second, Kind.SKILL, "y\n"))
        store.add_artifact(Artifact(first + "-sibling", Kind.SKILL, "z\n"))  # a shared prefix alone is fine
        assert store.artifact_ids() == sorted([first, first + "-sibling"])


@pytest.mark.parametrize("bad", ["../etc/passwd", "a/../../b", "/abs", "a\x00b", "x" * 201, "", "a//b", "a\\b"])
def test_invalid_ids_are_refused_everywhere(store: SQLiteStore, bad: str) -> None:
    with pytest.raises(InvalidIdError):
        store.head(bad)
    with pytest.raises(InvalidIdError):
        store.version(bad, 0)
    with pytest.raises(InvalidIdError):
        store.diff(bad)
    with pytest.raises(InvalidIdError):
        Artifact(bad, Kind.SKILL, "x")


def test_unknown_artifact_and_version_raise_typed_errors(store: SQLiteStore) -> None:
    with pytest.raises(UnknownArtifactError):
        store.head("skills/nope")
    with pytest.raises(UnknownArtifactError):
        store.history("skills/nope")
    with pytest.raises(UnknownArtifactError):
        store.commit(rule_diff(0, "x", "skills/nope"), evidence(), accept(rule_diff(0, "x", "skills/nope")))
    with pytest.raises(UnknownVersionError):
        store.version(AID, 1)
    with pytest.raises(UnknownVersionError):
        store.diff("d-never-seen")
    with pytest.raises(InvalidIdError):
        store.head(AID, "main")


def test_commits_round_trip_diff_evidence_decision_and_history(tmp_path: Path) -> None:
    ev = Evidence((Row("t9", 0.25, 0.75), Row("t1", 0.0, 1.0)), base_version=0, full=True, cost=0.125, tokens=42,
                  traces=("ran t9", "ran t1"))
    diffs = [rule_diff(0, "cite sources"),
             Diff(AID, 1, (Op.replace("rule", "- be brief", "- be very brief"), Op.add("key", "tone: dry")),
                  author="w2", rationale="tighten", breaks_contract=True),
             Diff(AID, 2, (Op.delete("rule", "- cite sources"),), author="w3")]
    decisions = [Decision(d.id, AID, Outcome.ACCEPTED, "accept", f"good {i}", {"p": 0.9 + i / 100, "wins": i},
                          fingerprint(d), ("part-a",) if i else ()) for i, d in enumerate(diffs)]
    with SQLiteStore(tmp_path, git=False, clock=Tick()) as store:
        store.add_artifact(Artifact(AID, Kind.SKILL, TEXT))
        versions = [store.commit(d, ev, k) for d, k in zip(diffs, decisions, strict=True)]
    with SQLiteStore(tmp_path, git=False) as reopened:
        texts = [TEXT]
        for diff in diffs:
            texts.append(apply(diff, texts[-1]))
        history = reopened.history(AID)
        assert [v.number for v in history] == [0, 1, 2, 3]
        assert [v.text for v in history] == texts
        assert [v.diff_id for v in history] == [None, *(d.id for d in diffs)]
        assert history[1:] == versions
        assert [reopened.version(AID, n) for n in range(4)] == history
        assert reopened.head(AID) == history[-1] and reopened.heads() == {AID: history[-1]}
        for diff, decision in zip(diffs, decisions, strict=True):
            assert reopened.diff(diff.id) == diff
            assert reopened.evidence(diff.id) == ev
            assert reopened.decisions(diff_id=diff.id) == [decision]
        assert reopened.decisions(artifact_id=AID) == decisions


@settings(max_examples=30, derandomize=True, deadline=None)
@given(st.lists(st.tuples(st.text(min_size=1, max_size=8), st.floats(0, 1), st.floats(0, 1)), max_size=12,
                unique_by=lambda r: r[0]),
       st.dictionaries(st.text(max_size=6), st.floats(allow_nan=False) | st.integers(-10**6, 10**6), max_size=4),
       st.text(max_size=40))
def test_any_evidence_and_decision_round_trip(tmp_path_factory: pytest.TempPathFactory,
                                              rows: list[tuple[str, float, float]], numbers: dict[str, float],
                                              reason: str) -> None:
    diff = rule_diff(0, "anything")
    ev = Evidence(tuple(Row(*r) for r in rows), traces=(reason,))
    decision = Decision(diff.id, AID, Outcome.REJECTED, "accept", reason, numbers)
    with SQLiteStore(tmp_path_factory.mktemp("run"), git=False) as store:
        store.add_artifact(Artifact(AID, Kind.SKILL, TEXT))
        store.record(diff, ev, decision)
        assert store.evidence(diff.id) == ev
        assert store.decisions() == [decision]


def test_stale_commit_raises_and_writes_nothing(store: SQLiteStore) -> None:
    first = rule_diff(0, "one")
    store.commit(first, evidence(), accept(first))
    before = table_counts(store)
    late = rule_diff(0, "two")
    with pytest.raises(StaleHeadError, match="v1"):
        store.commit(late, evidence(), accept(late))
    with pytest.raises(StaleHeadError):
        store.commit(rule_diff(1, "two"), evidence(), accept(rule_diff(1, "two")), expected=0)
    assert table_counts(store) == before
    assert store.head(AID).number == 1


def test_expected_overrides_the_diff_base_for_the_swap(store: SQLiteStore) -> None:
    first = rule_diff(0, "one")
    store.commit(first, evidence(), accept(first))
    moved = rule_diff(0, "two")  # made on v0, but the caller checked it applies on v1
    assert store.commit(moved, evidence(), accept(moved), expected=1).text == TEXT + "- one\n- two\n"


def test_l0_artifact_is_frozen_even_if_a_diff_reaches_the_store(store: SQLiteStore) -> None:
    store.add_artifact(Artifact("safety/rules", Kind.VERIFIER, "- never leak keys\n", Layer.L0))
    before = table_counts(store)
    diff = rule_diff(0, "leak keys sometimes", "safety/rules")
    with pytest.raises(FrozenLayerError):
        store.commit(diff, evidence(), accept(diff))
    with pytest.raises(FrozenLayerError):
        store.commit_many([(diff, evidence(), accept(diff))])
    assert table_counts(store) == before
    assert store.head("safety/rules").number == 0


def test_a_diff_whose_ops_do_not_apply_writes_nothing(store: SQLiteStore) -> None:
    before = table_counts(store)
    diff = Diff(AID, 0, (Op.delete("rule", "- not there"),))
    with pytest.raises(ApplyConflictError):
        store.commit(diff, evidence(), accept(diff))
    assert table_counts(store) == before


def test_commit_many_is_all_or_nothing(store: SQLiteStore) -> None:
    store.add_artifact(Artifact("skills/other", Kind.SKILL, ""))
    good = [rule_diff(0, "one"), rule_diff(1, "two"), rule_diff(0, "x", "skills/other")]
    bad = Diff(AID, 2, (Op.add("rule", "- one"),))  # already there after the first item
    before = table_counts(store)
    with pytest.raises(ApplyConflictError):
        store.commit_many([(d, evidence(), accept(d)) for d in [*good, bad]])
    assert table_counts(store) == before
    versions = store.commit_many([(d, evidence(), accept(d)) for d in good])
    assert [(v.artifact_id, v.number) for v in versions] == [(AID, 1), (AID, 2), ("skills/other", 1)]
    assert store.head(AID).text == TEXT + "- one\n- two\n"


def test_commit_needs_an_accepted_decision_about_the_same_diff(store: SQLiteStore) -> None:
    diff, other = rule_diff(0, "one"), rule_diff(0, "two")
    with pytest.raises(InvalidIdError):
        store.commit(diff, evidence(), accept(other))
    with pytest.raises(InvalidOpError, match="accepted"):
        store.commit(diff, evidence(), Decision(diff.id, AID, Outcome.REJECTED, "accept", "no"))
    with pytest.raises(InvalidOpError, match="accepted"):
        store.record(diff, evidence(), accept(diff))
    assert store.head(AID).number == 0


def test_a_committed_diff_cannot_be_committed_twice(store: SQLiteStore) -> None:
    diff = Diff(AID, 0, (Op.replace("rule", "- be brief", "- be short"),))
    store.commit(diff, evidence(), accept(diff))
    again = Diff(AID, 1, (Op.replace("rule", "- be short", "- be brief"),), id=diff.id)
    with pytest.raises(InvalidIdError, match="already committed"):
        store.commit(again, evidence(), accept(again))
    assert store.head(AID).number == 1


def test_record_keeps_rejected_diffs_and_is_idempotent(store: SQLiteStore) -> None:
    diff = rule_diff(0, "shout")
    rejected = Decision(diff.id, AID, Outcome.REJECTED, "accept", "P(better) too low", {"p": 0.4})
    store.record(diff, evidence(-0.5), rejected)
    store.record(diff, evidence(-0.5), rejected)
    assert store.decisions(diff_id=diff.id) == [rejected]
    assert store.diff(diff.id) == diff and store.evidence(diff.id) == evidence(-0.5)
    tabu = Decision(diff.id, AID, Outcome.TABU, "tabu", "rejected before")
    store.record(diff, evidence(-0.5), tabu)
    assert store.decisions(outcome=Outcome.REJECTED) == [rejected]
    assert store.decisions(outcome="tabu") == [tabu]
    assert store.head(AID).number == 0


def test_record_refuses_a_different_diff_under_a_used_id(store: SQLiteStore) -> None:
    diff = rule_diff(0, "shout")
    store.record(diff, evidence(), Decision(diff.id, AID, Outcome.REJECTED, "accept", "no"))
    impostor = Diff(AID, 0, (Op.add("rule", "- whisper"),), author="w1", rationale="add shout", id=diff.id)
    with pytest.raises(InvalidIdError, match="different diff"):
        store.record(impostor, evidence(), Decision(diff.id, AID, Outcome.REJECTED, "accept", "no"))
    assert store.diff(diff.id) == diff


def test_a_rebased_diff_keeps_its_id_and_commits_after_being_recorded_stale(store: SQLiteStore) -> None:
    first = rule_diff(0, "one")
    stale = rule_diff(0, "two")
    store.commit(first, evidence(), accept(first))
    store.record(stale, evidence(), Decision(stale.id, AID, Outcome.STALE, "staleness", "lag 1"))
    rebased = Diff(AID, 1, stale.ops, author=stale.author, rationale=stale.rationale, id=stale.id)
    version = store.commit(rebased, evidence(0.25), accept(rebased))
    assert version.number == 2 and store.diff(stale.id) == rebased
    assert store.evidence(stale.id) == evidence(0.25)
    assert [d.outcome for d in store.decisions(diff_id=stale.id)] == [Outcome.STALE, Outcome.ACCEPTED]


def test_revert_commits_the_inverse_and_records_reverted(store: SQLiteStore) -> None:
    bad = Diff(AID, 0, (Op.replace("rule", "- be brief", "- ramble"), Op.add("rule", "- use emoji")))
    store.commit(bad, evidence(), accept(bad))
    version = store.revert(AID, reason="held-out score fell")
    assert (version.number, version.text) == (2, TEXT)
    outcomes = [(d.outcome, d.stage) for d in store.decisions(diff_id=bad.id)]
    assert outcomes == [(Outcome.ACCEPTED, "accept"), (Outcome.REVERTED, "revert")]
    reverted = store.decisions(outcome=Outcome.REVERTED)[0]
    assert reverted.fingerprint == fingerprint(bad) and reverted.reason == "held-out score fell"
    inverse = store.diff(version.diff_id or "")
    assert apply(inverse, apply(bad, TEXT)) == TEXT and inverse.base_version == 1
    assert store.why(bad.id)["version"] == 1


def test_revert_with_nothing_to_revert_raises(store: SQLiteStore) -> None:
    with pytest.raises(UnknownVersionError, match="nothing to revert"):
        store.revert(AID, reason="why not")
    diff = rule_diff(0, "one")
    store.commit(diff, evidence(), accept(diff))
    with pytest.raises(StaleHeadError):
        store.revert(AID, reason="late", expected=0)
    assert store.head(AID).number == 1


def test_promote_moves_stable_to_dev_with_compare_and_swap(store: SQLiteStore) -> None:
    store.add_artifact(Artifact("skills/other", Kind.SKILL, "- x\n"))
    for n, rule in enumerate(["one", "two"]):
        diff = rule_diff(n, rule)
        store.commit(diff, evidence(), accept(diff))
    assert store.head(AID, "stable").number == 0
    with pytest.raises(StaleHeadError):
        store.promote([AID], expected={AID: 1})
    assert store.head(AID, "stable").number == 0
    assert store.promote([AID], expected={AID: 2}) == {AID: 2}
    assert store.head(AID, "stable") == store.head(AID)
    assert {a: v.number for a, v in store.heads("stable").items()} == {AID: 2, "skills/other": 0}
    with pytest.raises(UnknownArtifactError):
        store.promote(["skills/nope"])


def test_why_tells_the_whole_story_of_a_diff(store: SQLiteStore) -> None:
    diff = rule_diff(0, "cite")
    store.record(diff, evidence(), Decision(diff.id, AID, Outcome.RECHECK, "staleness", "rebased"))
    store.commit(diff, evidence(), accept(diff))
    story = store.why(diff.id)
    assert story["diff"] == diff.to_dict() and story["version"] == 1
    assert story["evidence"]["tasks"] == 2 and story["evidence"]["wins"] == pytest.approx(0.75)
    assert [d["outcome"] for d in story["decisions"]] == ["recheck", "accepted"]


def test_created_times_come_from_the_injected_clock(tmp_path: Path) -> None:
    clock = Tick()
    with SQLiteStore(tmp_path, git=False, clock=clock) as store:
        store.add_artifact(Artifact(AID, Kind.SKILL, TEXT))
        diff = rule_diff(0, "one")
        store.commit(diff, evidence(), accept(diff))
    with sqlite3.connect(tmp_path / "agentgrad.db") as conn:
        assert [r[0] for r in conn.execute("SELECT created FROM versions ORDER BY seq")] == [1000.0, 1001.0]


def test_database_uses_wal_foreign_keys_and_no_pickle(store: SQLiteStore) -> None:
    conn = store._conn
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] >= 1000
    types = {r[0] for r in conn.execute("SELECT DISTINCT typeof(body) FROM diffs")}
    assert types <= {"text"}


def test_evidence_rows_are_looked_up_by_index_at_scale(store: SQLiteStore) -> None:
    for n in range(40):
        diff = rule_diff(0, f"candidate {n}")
        ev = Evidence.paired({f"t{i}": 0.5 for i in range(500)}, {f"t{i}": (i % 3) / 2 for i in range(500)})
        store.record(diff, ev, Decision(diff.id, AID, Outcome.REJECTED, "accept", "no"))
    assert row_count(store, "evidence_rows") == 20_000
    assert store.evidence(diff.id) == ev
    plan = store._conn.execute("EXPLAIN QUERY PLAN SELECT task_id FROM evidence_rows WHERE diff_id = ? ORDER BY idx",
                               (diff.id,)).fetchall()
    assert "USING PRIMARY KEY" in str(plan) and "SCAN" not in str(plan)


def test_promote_to_moves_stable_to_a_checked_version_never_back(store: SQLiteStore) -> None:
    for n, rule in enumerate(["one", "two", "three"]):
        diff = rule_diff(n, rule)
        store.commit(diff, evidence(), accept(diff))
    assert store.promote_to({AID: 1}) == {AID: 1}
    assert store.head(AID, "stable").number == 1 and store.head(AID).number == 3
    with pytest.raises(UnknownVersionError):
        store.promote_to({AID: 4})
    store.promote_to({AID: 2})
    with pytest.raises(StaleHeadError, match="past v1"):
        store.promote_to({AID: 1})
    assert store.head(AID, "stable").number == 2
