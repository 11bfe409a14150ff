"""The focus and far marks of evidence: they name rows, survive dicts, restriction, fusion and the SQLite store."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentgrad.core.artifact import Artifact, Kind
from agentgrad.core.decision import Decision, Outcome
from agentgrad.core.diff import Diff
from agentgrad.core.evidence import Evidence, Row, concatenate
from agentgrad.core.ops import Op
from agentgrad.errors import InvalidEvidenceError
from agentgrad.store.sqlite import SQLiteStore

AID = "skills/style"
TEXT = "# Style\n- be brief\n"


def marked() -> Evidence:
    return Evidence.paired({"a": 0.0, "b": 0.0, "c": 1.0, "d": 0.5}, {"a": 1.0, "b": 0.0, "c": 1.0, "d": 0.25},
                           base_version=3, cost=0.5, tokens=40, traces=("ran a",), focus=("a", "b"),
                           far=("d", "c"))


def test_marks_default_to_none() -> None:
    evidence = Evidence.paired({"a": 0.0}, {"a": 1.0})
    assert (evidence.focus, evidence.far) == ((), ())


def test_marks_keep_their_order() -> None:
    assert (marked().focus, marked().far) == (("a", "b"), ("d", "c"))


@pytest.mark.parametrize("name", ["focus", "far"])
def test_a_mark_naming_no_row_is_refused(name: str) -> None:
    rows = (Row("a", 0.0, 1.0),)
    with pytest.raises(InvalidEvidenceError, match=f"marks {name} tasks.*ghost"):
        Evidence(rows, **{name: ("a", "ghost")})  # type: ignore[arg-type]


def test_marks_on_evidence_without_rows_are_refused() -> None:
    with pytest.raises(InvalidEvidenceError):
        Evidence((), far=("a",))


def test_marks_given_as_lists_are_kept_as_tuples() -> None:
    evidence = Evidence((Row("a", 0.0, 1.0),), focus=["a"], far=["a"])  # type: ignore[arg-type]
    assert evidence.focus == ("a",) and evidence.far == ("a",)
    assert evidence == Evidence((Row("a", 0.0, 1.0),), focus=("a",), far=("a",))


def test_marks_round_trip_through_the_dict() -> None:
    data = marked().to_dict()
    assert data["focus"] == ["a", "b"] and data["far"] == ["d", "c"]
    assert Evidence.from_dict(data) == marked()


def test_marks_round_trip_through_json() -> None:
    assert Evidence.from_dict(json.loads(json.dumps(marked().to_dict()))) == marked()


def test_an_old_dict_without_marks_loads_with_none() -> None:
    data = marked().to_dict()
    del data["focus"], data["far"]
    loaded = Evidence.from_dict(data)
    assert (loaded.focus, loaded.far) == ((), ())
    assert loaded.rows == marked().rows and loaded.traces == marked().traces


def test_a_dict_marking_an_unknown_row_is_refused() -> None:
    data = {**marked().to_dict(), "far": ["a", "zz"]}
    with pytest.raises(InvalidEvidenceError, match="zz"):
        Evidence.from_dict(data)


def test_restricted_keeps_only_the_marks_of_kept_rows() -> None:
    kept = marked().restricted({"a", "c"})
    assert kept.task_ids == ("a", "c")
    assert (kept.focus, kept.far) == (("a",), ("c",))


def test_restricted_to_nothing_keeps_no_marks() -> None:
    empty = marked().restricted(())
    assert (empty.rows, empty.focus, empty.far) == ((), (), ())


def test_concatenate_prefixes_the_marks_with_the_part() -> None:
    one = Evidence.paired({"a": 0.0, "b": 1.0}, {"a": 1.0, "b": 1.0}, focus=("a",), far=("b",))
    two = Evidence.paired({"a": 0.0}, {"a": 0.0}, far=("a",))
    fused = concatenate([("d1", one), ("d2", two)])
    assert fused.focus == ("d1:a",)
    assert fused.far == ("d1:b", "d2:a")
    assert set(fused.focus) | set(fused.far) <= set(fused.task_ids)


def test_concatenate_of_unmarked_parts_has_no_marks() -> None:
    fused = concatenate([("d1", Evidence.paired({"a": 0.0}, {"a": 1.0}))])
    assert (fused.focus, fused.far) == ((), ())


class Tick:
    """A deterministic clock: 1000.0, 1001.0, ..."""

    def __init__(self) -> None:
        self.now = 999.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    with SQLiteStore(tmp_path / "run", git=False, clock=Tick()) as opened:
        opened.add_artifact(Artifact(AID, Kind.SKILL, TEXT))
        yield opened


def rule_diff(base: int, rule: str) -> Diff:
    return Diff(AID, base, (Op.add("rule", f"- {rule}"),), author="w1", rationale=f"add {rule}")


def rejected(diff: Diff) -> Decision:
    return Decision(diff.id, AID, Outcome.REJECTED, "accept", "no")


def stored_traces(store: SQLiteStore, diff_id: str) -> object:
    with sqlite3.connect(store.run_dir / "agentgrad.db") as conn:
        return json.loads(conn.execute("SELECT traces FROM evidence WHERE diff_id = ?", (diff_id,)).fetchone()[0])


def test_the_store_keeps_the_marks_of_recorded_evidence(store: SQLiteStore) -> None:
    diff = rule_diff(0, "one")
    store.record(diff, marked(), rejected(diff))
    assert store.evidence(diff.id) == marked()


def test_the_store_keeps_the_marks_of_committed_evidence(store: SQLiteStore) -> None:
    diff = rule_diff(0, "one")
    store.commit(diff, marked(), Decision(diff.id, AID, Outcome.ACCEPTED, "accept", "yes", {"p": 0.99}))
    assert store.evidence(diff.id) == marked()


def test_marks_survive_reopening_the_store(tmp_path: Path) -> None:
    diff = rule_diff(0, "one")
    with SQLiteStore(tmp_path / "run", git=False, clock=Tick()) as first:
        first.add_artifact(Artifact(AID, Kind.SKILL, TEXT))
        first.record(diff, marked(), rejected(diff))
    with SQLiteStore(tmp_path / "run", git=False, clock=Tick()) as again:
        assert again.evidence(diff.id) == marked()


def test_only_far_marks_round_trip(store: SQLiteStore) -> None:
    evidence = Evidence.paired({"a": 0.0, "b": 1.0}, {"a": 1.0, "b": 1.0}, far=("b",))
    diff = rule_diff(0, "one")
    store.record(diff, evidence, rejected(diff))
    assert store.evidence(diff.id) == evidence


def test_evidence_without_marks_is_stored_in_the_old_form_and_loads(store: SQLiteStore) -> None:
    plain = Evidence.paired({"a": 0.0}, {"a": 1.0}, traces=("x", "y"))
    diff = rule_diff(0, "one")
    store.record(diff, plain, rejected(diff))
    assert stored_traces(store, diff.id) == ["x", "y"]  # the traces column as stores before the marks wrote it
    assert store.evidence(diff.id) == plain


def test_evidence_with_marks_stores_traces_and_marks_together(store: SQLiteStore) -> None:
    diff = rule_diff(0, "one")
    store.record(diff, marked(), rejected(diff))
    stored = stored_traces(store, diff.id)
    assert isinstance(stored, dict)
    assert {k: stored[k] for k in ("traces", "focus", "far")} == \
        {"traces": ["ran a"], "focus": ["a", "b"], "far": ["d", "c"]}


def test_re_recording_without_marks_drops_the_old_marks(store: SQLiteStore) -> None:
    diff = rule_diff(0, "one")
    store.record(diff, marked(), rejected(diff))
    old = marked()
    plain = Evidence(old.rows, old.base_version, old.full, old.cost, old.tokens, old.traces)
    store.record(diff, plain, rejected(diff))
    assert store.evidence(diff.id) == plain


def replicated() -> Evidence:
    return Evidence.paired({"a": 1.0, "o@1f": 0.0, "o@2e": 0.0}, {"a": 1.0, "o@1f": 1.0, "o@2e": 1.0},
                           base_version=4, replicas=("o@1f", "o@2e"))


def test_replica_marks_must_name_rows_and_round_trip_through_the_dict() -> None:
    with pytest.raises(InvalidEvidenceError, match=r"marks replicas tasks.*ghost"):
        Evidence((Row("a", 0.0, 1.0),), replicas=("ghost",))
    assert Evidence.from_dict(replicated().to_dict()) == replicated()
    assert replicated().restricted(["a", "o@1f"]).replicas == ("o@1f",)


def test_the_store_keeps_replica_marks(store: SQLiteStore) -> None:
    diff = rule_diff(0, "one")
    store.record(diff, replicated(), rejected(diff))
    assert store.evidence(diff.id) == replicated()


def test_a_fused_union_keeps_replica_marks_only_when_every_part_was_replicated() -> None:
    both = concatenate([("p", replicated()), ("q", replicated())])
    assert both.replicas == ("p:o@1f", "p:o@2e", "q:o@1f", "q:o@2e")
    mixed = concatenate([("p", replicated()), ("q", marked())])
    assert mixed.replicas == () and "p:o@1f" in mixed.task_ids
