"""One writer per run directory: a second one is refused at once with the holder named; a killed holder frees it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from agentgrad.errors import RunDirLockedError
from agentgrad.runtime.budget import Budget
from agentgrad.store.ownership import WriterLock
from tests.runtime.helpers import agent, dispatched, events, run


def test_a_second_writer_is_refused_naming_the_holder(tmp_path: Path) -> None:
    with WriterLock(tmp_path), pytest.raises(RunDirLockedError, match=f"pid {os.getpid()} on "):
        WriterLock(tmp_path).acquire()
    with WriterLock(tmp_path) as again:  # released: free again
        assert again.held


def test_evolve_on_a_directory_another_run_writes_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    with WriterLock(tmp_path), pytest.raises(RunDirLockedError, match="being written by another run"):
        run(tmp_path, agent(), asynchronous=False)
    assert not (tmp_path / "agentgrad.db").exists()


def test_two_runs_at_once_on_one_directory_one_runs_and_the_other_is_refused(tmp_path: Path) -> None:
    budget = Budget(rollouts=24, proposals=12, gate_evals=200)
    outcomes: list[object] = []
    start = threading.Barrier(2)

    def one() -> None:
        start.wait()
        try:
            outcomes.append(run(tmp_path, agent(median=0.002), budget=budget, asynchronous=True))
        except RunDirLockedError as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=one) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert sorted(type(o).__name__ for o in outcomes) == ["Result", "RunDirLockedError"]
    spent = dispatched(tmp_path)
    assert spent["rollouts"] <= 24 and spent["proposals"] <= 12 and spent["gate_evals"] <= 200
    calls = [p["call"] for _, p in events(tmp_path, ["dispatch"])]
    assert len(calls) == len(set(calls))  # no call id used twice


_HOLD_AND_DIE = textwrap.dedent("""
    import os, signal, sys
    from agentgrad.store.ownership import WriterLock
    WriterLock(sys.argv[1]).acquire()
    os.kill(os.getpid(), signal.SIGKILL)
""")


def test_a_holder_killed_with_minus_9_frees_the_directory(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", _HOLD_AND_DIE, str(tmp_path)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == -signal.SIGKILL, done.stderr
    with WriterLock(tmp_path) as lock:
        assert lock.held


def test_two_processes_on_one_run_directory_one_runs_and_the_other_is_refused(tmp_path: Path) -> None:
    helper = Path(__file__).parents[1] / "runtime" / "killable_run.py"
    procs = [subprocess.Popen([sys.executable, str(helper), str(tmp_path), "async", "3"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=Path(__file__).parents[2]) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    finished = [out for out, _ in outs if '"ok": true' in out]
    refused = [err for _, err in outs if "RunDirLockedError" in err and "being written by another run" in err]
    assert len(finished) == 1 and len(refused) == 1, [o[1][-500:] for o in outs]
    spent = dispatched(tmp_path)
    assert spent["rollouts"] <= 48 and spent["proposals"] <= 24 and spent["gate_evals"] <= 360
