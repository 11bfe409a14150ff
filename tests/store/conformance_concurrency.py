"""The concurrency promises of `Store`: writers in threads and in processes never lose or duplicate a commit, and
never leave one head of a batch moved and the other not.

Every writer commits *pairs*: one batch of two diffs, one on each of two artifacts, made against the heads it
read, retried on `StaleHeadError`. So at every moment both heads must stand at the same version number (a watcher
checks this while the writers run), and afterwards the n-th version of each artifact must come from the same pair.
Half the writers put the skill first in their batch and half the harness, as lock-ordering backends would mind.
The process workers live here, at module level, so that processes started with 'spawn' can import them.
"""

from __future__ import annotations

import itertools
import multiprocessing
import queue
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from multiprocessing.process import BaseProcess
from multiprocessing.queues import Queue
from pathlib import Path
from typing import Protocol

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentgrad.core.artifact import Version
from agentgrad.core.decision import Outcome
from agentgrad.core.diff import Diff, apply
from agentgrad.core.ops import Op
from agentgrad.errors import StaleHeadError
from agentgrad.store.protocol import Store
from tests.store.conformance_support import HARNESS, SKILL, ConformanceBase, StoreFactory, item, seed

MAX_ATTEMPTS = 500  # a writer that never wins a swap in this many tries means the store is stuck
POLL = 0.005  # seconds between the watcher's reads (a wait, not a clock read)
POLLS = 24_000  # the parent gives processes at most about POLLS * POLL seconds


class Waits(Protocol):
    """A barrier, of threads or of processes."""

    def wait(self, timeout: float | None = None) -> int: ...


def pair(heads: Mapping[str, Version], worker: int, batch: int, attempt: int, skill_first: bool) -> list[Diff]:
    """One batch: a rule on the skill and one on the harness, on the heads read, both tagged with the pair."""
    tag = f"w{worker} b{batch}"
    order = (SKILL, HARNESS) if skill_first else (HARNESS, SKILL)
    return [Diff(a, heads[a].number, (Op.add("rule", f"- {tag} try {attempt}"),), author=f"w{worker}", rationale=tag)
            for a in order]


def commit_pairs(store: Store, worker: int, orders: Sequence[bool], start: Waits) -> list[str]:
    """Commit one pair per entry of `orders` (True: skill first), retrying stale ones; the tags committed.

    Each read of the heads also checks that they stand together (the writers are readers too)."""
    done: list[str] = []
    start.wait(60)
    for batch, skill_first in enumerate(orders):
        for attempt in range(MAX_ATTEMPTS):
            heads = store.heads()
            assert heads[SKILL].number == heads[HARNESS].number, f"worker {worker} read one head of a pair moved"
            diffs = pair(heads, worker, batch, attempt, skill_first)
            try:
                store.commit_many([item(d) for d in diffs])
            except StaleHeadError:
                continue
            done.append(diffs[0].rationale)
            break
        else:
            raise AssertionError(f"worker {worker} lost {MAX_ATTEMPTS} swaps in a row on pair {batch}")
    return done


def watch(store: Store, stop: threading.Event) -> list[tuple[int, int]]:
    """Read both heads until `stop`; every (skill, harness) version number pair seen."""
    seen: list[tuple[int, int]] = []
    while True:
        heads = store.heads()
        seen.append((heads[SKILL].number, heads[HARNESS].number))
        if stop.wait(POLL):
            return seen


def check_pairs(store: Store, committed: Sequence[str], seen: Sequence[tuple[int, int]]) -> None:
    """No commit lost, duplicated or half made: both histories are 0..N for the N pairs committed, version n of
    both comes from the same pair, each version is its diff applied to the one before, and refused swaps wrote
    nothing; the watcher never saw the two heads apart."""
    assert [s for s in seen if s[0] != s[1]] == [], "a reader saw one head of a pair moved and the other not"
    assert len(set(committed)) == len(committed)
    tags: list[list[str]] = []
    for artifact_id in (SKILL, HARNESS):
        history = store.history(artifact_id)
        assert [v.number for v in history] == list(range(len(committed) + 1))
        diffs = [store.diff(v.diff_id or "") for v in history[1:]]
        for (previous, current), diff in zip(itertools.pairwise(history), diffs, strict=True):
            assert diff.base_version == previous.number and apply(diff, previous.text) == current.text
        tags.append([d.rationale for d in diffs])
    assert tags[0] == tags[1], "the two artifacts' versions come from different pairs"
    assert sorted(tags[0]) == sorted(committed)
    assert len(store.decisions(outcome=Outcome.ACCEPTED)) == len(store.decisions()) == 2 * len(committed)


def run_threads(factory: StoreFactory, run_dir: Path, shared: Store | None, plan: Sequence[Sequence[bool]]
                ) -> tuple[list[str], list[tuple[int, int]]]:
    """One writer thread per entry of `plan` and a watcher, on `shared` or each on its own store."""
    start, stop = threading.Barrier(len(plan)), threading.Event()

    def on_store(work: Callable[[Store], list[str]]) -> list[str]:
        if shared is not None:
            return work(shared)
        with factory(run_dir) as own:
            return work(own)

    def watcher() -> list[tuple[int, int]]:
        if shared is not None:
            return watch(shared, stop)
        with factory(run_dir) as own:
            return watch(own, stop)

    with ThreadPoolExecutor(len(plan) + 1) as pool:
        watching = pool.submit(watcher)
        writers = [pool.submit(on_store, partial(commit_pairs, worker=w, orders=o, start=start))
                   for w, o in enumerate(plan)]
        try:
            committed = [tag for f in writers for tag in f.result(timeout=120)]
        finally:
            stop.set()
        return committed, watching.result(timeout=60)


def process_writer(factory: StoreFactory, run_dir: str, worker: int, orders: list[bool], start: Waits,
                   out: Queue[tuple[int, list[str]]]) -> None:
    """A process: open its own store with `factory`, `commit_pairs`, report the tags on `out`."""
    with factory(Path(run_dir)) as store:
        out.put((worker, commit_pairs(store, worker, orders, start)))


def collect(processes: Sequence[BaseProcess], out: Queue[tuple[int, list[str]]], store: Store
            ) -> tuple[dict[int, list[str]], list[tuple[int, int]]]:
    """Every process's report, watching both heads on `store` meanwhile; fails if a process dies."""
    results: dict[int, list[str]] = {}
    seen: list[tuple[int, int]] = []
    for _ in range(POLLS):
        if len(results) == len(processes):
            return results, seen
        try:
            worker, tags = out.get(timeout=POLL)
        except queue.Empty:
            heads = store.heads()
            seen.append((heads[SKILL].number, heads[HARNESS].number))
            dead = [p.exitcode for p in processes if p.exitcode not in (None, 0)]
            assert not dead, f"a writer process failed (exit codes {dead}); see its stderr"
            continue
        results[worker] = tags
    raise AssertionError(f"writer processes did not finish; {len(results)} of {len(processes)} reported")


ORDERS = st.lists(st.booleans(), min_size=1, max_size=4)


class ConcurrencyPromises(ConformanceBase):
    """Concurrent writers serialise: compare-and-swap holds across threads and processes."""

    @settings(max_examples=8, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(plan=st.lists(ORDERS, min_size=2, max_size=4), shared=st.booleans())
    def test_writer_threads_lose_no_commit_and_move_both_heads_or_neither(
            self, store_factory: StoreFactory, plan: list[list[bool]], shared: bool) -> None:
        with tempfile.TemporaryDirectory() as tmp, store_factory(Path(tmp)) as store:
            seed(store)
            committed, seen = run_threads(store_factory, Path(tmp), store if shared else None, plan)
            assert len(committed) == sum(map(len, plan))
            check_pairs(store, committed, seen)

    def test_writer_processes_lose_no_commit_and_move_both_heads_or_neither(
            self, store_factory: StoreFactory, run_dir: Path) -> None:
        plan = [[True, False] * 6, [False, True] * 6, [True] * 12]
        context = multiprocessing.get_context("spawn")
        start, out = context.Barrier(len(plan)), context.Queue()
        with store_factory(run_dir) as store:
            seed(store)
            processes = [context.Process(target=process_writer, args=(store_factory, str(run_dir), w, o, start, out))
                         for w, o in enumerate(plan)]
            for process in processes:
                process.start()
            try:
                results, seen = collect(processes, out, store)
            finally:
                for process in processes:
                    process.join(60)
                    if process.is_alive():
                        process.terminate()
            assert [p.exitcode for p in processes] == [0] * len(plan)
            committed = list(itertools.chain.from_iterable(results[w] for w in sorted(results)))
            assert len(committed) == sum(map(len, plan))
            check_pairs(store, committed, seen)
