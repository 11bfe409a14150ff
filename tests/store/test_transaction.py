"""One transaction for the store and its journal: all or nothing, even under kill -9; nested writes are savepoints."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agentgrad.core.artifact import Artifact, Kind
from agentgrad.core.decision import Decision, Outcome
from agentgrad.core.diff import Diff, fingerprint
from agentgrad.core.evidence import Evidence
from agentgrad.core.ops import Op
from agentgrad.store.events import EventLog
from agentgrad.store.sqlite import SQLiteStore


def _accepted(base: int, rule: str) -> tuple[Diff, Evidence, Decision]:
    diff = Diff("skill", base, (Op.add("rule", rule),))
    return diff, Evidence(()), Decision(diff.id, "skill", Outcome.ACCEPTED, "test", "ok", {}, fingerprint(diff))


def _store(path: Path) -> SQLiteStore:
    store = SQLiteStore(path, git=False)
    store.add_artifact(Artifact("skill", Kind.SKILL, "# Skill\n"))
    return store


def test_a_commit_and_its_events_commit_together_or_not_at_all(tmp_path: Path) -> None:
    store = _store(tmp_path)
    with store.transaction():
        store.commit_many([_accepted(0, "- a: use method 1")])
        store.journal.append("commit", {"version": 1})
    with pytest.raises(RuntimeError, match="boom"), store.transaction():
        store.commit_many([_accepted(1, "- b: use method 2")])
        store.journal.append("commit", {"version": 2})
        raise RuntimeError("boom")
    assert store.head("skill").number == 1
    assert [e.payload["version"] for e in store.journal.read(["commit"])] == [1]
    store.close()


def test_a_failed_nested_write_undoes_only_itself(tmp_path: Path) -> None:
    store = _store(tmp_path)
    with store.transaction():
        store.journal.append("note", {"n": 1})
        with pytest.raises(Exception, match="dev head is v1, not v5"):
            store.commit_many([_accepted(0, "- a: use method 1"), _accepted(5, "- b: use method 2")])
        store.journal.append("note", {"n": 2})
    assert store.head("skill").number == 0  # the whole batch, its first diff too, was undone
    assert [e.payload["n"] for e in store.journal.read(["note"])] == [1, 2]
    store.close()


def test_nothing_is_visible_to_another_connection_before_the_outermost_commit(tmp_path: Path) -> None:
    store = _store(tmp_path)
    reader = EventLog(tmp_path)
    with store.transaction():
        store.journal.append("note", {"n": 1})
        with store.transaction():
            store.journal.append("note", {"n": 2})
        assert reader.count("note") == 0
    assert reader.count("note") == 2
    reader.close()
    store.close()


def test_deferred_events_join_the_next_transaction_and_survive_its_rollback(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.journal.append("dispatch", {"call": 0}, defer=True)
    with pytest.raises(RuntimeError), store.transaction():
        store.journal.append("decision", {"diff_id": "x"})
        raise RuntimeError("rolled back")
    assert store.journal.deferred == 1  # taken back: the rolled-back transaction lost no event
    store.journal.flush()
    assert [e.kind for e in store.journal.read()] == ["dispatch"]
    store.close()


_KILLED_INSIDE = textwrap.dedent("""
    import os, signal, sys
    from agentgrad.store.sqlite import SQLiteStore
    from tests.store.test_transaction import _accepted
    store = SQLiteStore(sys.argv[1], git=False)
    with store.transaction():
        store.commit_many([_accepted(0, "- a: use method 1")])
        store.journal.append("commit", {"version": 1})
        store.journal.put("checkpoint", {"step": 1})
        os.kill(os.getpid(), signal.SIGKILL)
""")


def test_kill_9_inside_a_transaction_leaves_none_of_it(tmp_path: Path) -> None:
    _store(tmp_path).close()
    done = subprocess.run([sys.executable, "-c", _KILLED_INSIDE, str(tmp_path)], capture_output=True, text=True,
                          timeout=60, cwd=Path(__file__).parents[2])
    assert done.returncode == -signal.SIGKILL, done.stderr
    with SQLiteStore(tmp_path, git=False) as store:
        assert store.head("skill").number == 0
        assert store.journal.count("commit") == 0
        assert store.journal.get("checkpoint") is None


def test_the_log_refuses_a_call_id_dispatched_twice(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.journal.append("dispatch", {"call": 7, "kind": "rollouts"})
    store.journal.append("done", {"call": 7})  # other kinds may name the call again
    with pytest.raises(sqlite3.IntegrityError):
        store.journal.append("dispatch", {"call": 7, "kind": "rollouts"})
    assert store.journal.count("dispatch") == 1
    store.close()
