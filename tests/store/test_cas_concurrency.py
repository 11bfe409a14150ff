"""Compare-and-swap on the dev head: no lost or duplicated update, in any interleaving, threads or processes."""

from __future__ import annotations

import itertools
import multiprocessing
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.queues import Queue
from pathlib import Path
from typing import Protocol

from hypothesis import given, settings
from hypothesis import strategies as st

from agentgrad.core.artifact import Artifact, Kind
from agentgrad.core.decision import Decision, Outcome
from agentgrad.core.diff import Diff, apply
from agentgrad.core.evidence import Evidence
from agentgrad.core.ops import Op
from agentgrad.errors import StaleHeadError
from agentgrad.store.sqlite import SQLiteStore

AID = "skills/shared"
TEXT = "# Shared skill\n"
EVIDENCE = Evidence.paired({"t1": 0.0, "t2": 0.0}, {"t1": 1.0, "t2": 1.0})


def accept(diff: Diff) -> Decision:
    return Decision(diff.id, diff.artifact_id, Outcome.ACCEPTED, "accept", "reason", {"p": 0.99})


def new_run(run_dir: Path, *, git: bool = False) -> None:
    with SQLiteStore(run_dir, git=git) as store:
        store.add_artifact(Artifact(AID, Kind.SKILL, TEXT))


class Waits(Protocol):
    def wait(self, timeout: float | None = None) -> int: ...


def commit_until(run_dir: str, worker: int, successes: int, git: bool, start: Waits) -> list[str]:
    """A worker: read the head, propose a rule, commit; on StaleHeadError read again. Returns its committed ids.

    All workers open their store, then wait at `start` so that their commits overlap.
    """
    done: list[str] = []
    attempt = 0
    with SQLiteStore(run_dir, git=git) as store:
        start.wait(60)
        while len(done) < successes:
            head = store.head(AID)
            diff = Diff(AID, head.number, (Op.add("rule", f"- worker {worker} attempt {attempt}"),),
                        author=f"w{worker}")
            attempt += 1
            try:
                store.commit(diff, EVIDENCE, accept(diff))
            except StaleHeadError:
                continue
            done.append(diff.id)
    return done


def process_worker(run_dir: str, worker: int, successes: int, start: Waits, out: Queue[tuple[int, list[str]]]
                   ) -> None:
    """A process: `commit_until`, then report its committed ids on `out`."""
    out.put((worker, commit_until(run_dir, worker, successes, False, start)))


def check_history(run_dir: Path, committed: list[str]) -> None:
    """Versions 0..N with N = successful commits, each diff once, each text = its diff applied to the previous."""
    assert len(set(committed)) == len(committed)
    with SQLiteStore(run_dir, git=False) as store:
        history = store.history(AID)
        assert [v.number for v in history] == list(range(len(committed) + 1))
        assert sorted(v.diff_id or "" for v in history[1:]) == sorted(committed)
        for previous, current in itertools.pairwise(history):
            diff = store.diff(current.diff_id or "")
            assert diff.base_version == previous.number
            assert apply(diff, previous.text) == current.text
        stored_diffs = store._conn.execute("SELECT count(*) FROM diffs").fetchone()[0]
        assert stored_diffs == len(committed)  # failed swaps wrote nothing


@settings(max_examples=30, derandomize=True, deadline=None)
@given(st.lists(st.integers(0, 2), min_size=1, max_size=30))
def test_any_interleaving_of_read_and_commit_loses_no_update(schedule: list[int]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp)
        new_run(run_dir)
        stores = [SQLiteStore(run_dir, git=False) for _ in range(3)]
        pending: dict[int, Diff] = {}
        committed: list[str] = []
        try:
            for step, worker in enumerate(schedule):
                store = stores[worker]
                if worker not in pending:  # read the head and prepare a diff against it
                    base = store.head(AID).number
                    pending[worker] = Diff(AID, base, (Op.add("rule", f"- w{worker} s{step}"),))
                    continue
                diff = pending.pop(worker)
                fresh = diff.base_version == len(committed)  # the model: the swap succeeds iff nobody moved the head
                try:
                    store.commit(diff, EVIDENCE, accept(diff))
                    assert fresh, "a commit on a moved head was accepted"
                    committed.append(diff.id)
                except StaleHeadError:
                    assert not fresh, "a commit on the current head was refused"
        finally:
            for store in stores:
                store.close()
        check_history(run_dir, committed)


def test_four_threads_committing_with_retries_lose_nothing(tmp_path: Path) -> None:
    new_run(tmp_path, git=True)
    start = threading.Barrier(4)
    with ThreadPoolExecutor(4) as pool:  # result() re-raises a worker's error in the test
        futures = [pool.submit(commit_until, str(tmp_path), w, 15, True, start) for w in range(4)]
        results = {w: f.result(timeout=120) for w, f in enumerate(futures)}
    committed = [d for w in sorted(results) for d in results[w]]
    assert len(committed) == 60
    check_history(tmp_path, committed)
    with SQLiteStore(tmp_path, git=True) as store:
        assert store.git_lag() == 0  # every thread's close() synced; together they mirrored each version once
        mirrored = store._conn.execute("SELECT count(*), count(DISTINCT sha) FROM mirror").fetchone()
        assert tuple(mirrored) == (61, 61)


def test_three_processes_committing_with_retries_lose_nothing(tmp_path: Path) -> None:
    new_run(tmp_path)
    context = multiprocessing.get_context("spawn")
    start, out = context.Barrier(3), context.Queue()
    processes = [context.Process(target=process_worker, args=(str(tmp_path), w, 25, start, out)) for w in range(3)]
    for process in processes:
        process.start()
    results = dict(out.get(timeout=120) for _ in processes)
    for process in processes:
        process.join(60)
        assert process.exitcode == 0
    committed = [d for w in sorted(results) for d in results[w]]
    assert len(committed) == 75
    check_history(tmp_path, committed)
