"""Resume: continuing a run directory in-process, and after kill -9 at random points of a real subprocess."""

from __future__ import annotations

import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from agentgrad.core.artifact import Artifact, Kind
from agentgrad.core.decision import Outcome
from agentgrad.errors import AgentgradError, ConfigError, DamagedStoreError
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.config import RunConfig
from agentgrad.runtime.evolve import evolve
from agentgrad.store.sqlite import SQLiteStore
from tests.runtime import killable_run
from tests.runtime.helpers import WORLD, agent, check_commits, dispatched, events, replay_store, run

HELPER = Path(killable_run.__file__)
SMALL = Budget(rollouts=12, proposals=6, gate_evals=120)
LARGE = Budget(rollouts=48, proposals=24, gate_evals=480)


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_larger_budget_continues_the_run_in_the_same_directory(tmp_path: Path, asynchronous: bool) -> None:
    first = run(tmp_path, agent(median=0.001), budget=SMALL, asynchronous=asynchronous)
    second = run(tmp_path, agent(median=0.001), budget=LARGE, asynchronous=asynchronous)
    assert first.ok and second.ok, (first.error, second.error)
    assert second.history[:len(first.history)] == first.history
    assert len(second.history) > len(first.history)
    logged = dispatched(tmp_path)
    for kind in ("rollouts", "proposals", "gate_evals"):
        assert getattr(second.usage, kind) == logged[kind] <= LARGE.limit(kind)  # totals over both sessions
        assert getattr(first.usage, kind) <= getattr(second.usage, kind)
    resumed = [p for _, p in events(tmp_path, ["resumed"])]
    assert len(resumed) == 1
    assert resumed[0]["used"]["gate_evals"] == first.usage.gate_evals
    check_commits(tmp_path)


def test_work_in_flight_when_a_session_ends_is_evaluated_by_the_next(tmp_path: Path) -> None:
    no_promotion = RunConfig(promote_every=0)  # its checks would spend the gate budget this test counts on
    first = run(tmp_path, agent(median=0.001), budget=SMALL, config=no_promotion)
    deferred = {d.diff_id for d in first.decisions if d.outcome is Outcome.DEFERRED and d.stage == "gate"}
    ample_gate = Budget(rollouts=48, proposals=24, gate_evals=100_000)  # so the second session drains its gate
    second = run(tmp_path, agent(median=0.001), budget=ample_gate, config=no_promotion)
    last = {o["diff"]: o["outcome"] for o in second.outcomes()}
    assert all(last[d] != Outcome.DEFERRED.value for d in deferred)
    assert next(p["in_flight"] for _, p in events(tmp_path, ["resumed"])) >= len(deferred)


def test_resuming_a_finished_run_with_the_same_budget_changes_nothing(tmp_path: Path) -> None:
    first = run(tmp_path, agent(), budget=SMALL, asynchronous=False)
    again = run(tmp_path, agent(), budget=SMALL, asynchronous=False)
    assert again.ok
    assert again.history == first.history
    assert again.usage.gate_evals == first.usage.gate_evals
    check_commits(tmp_path)


def test_a_directory_holding_another_run_is_refused(tmp_path: Path) -> None:
    run(tmp_path, agent(), budget=SMALL, asynchronous=False)
    bot = agent()
    with pytest.raises(ConfigError, match="another run"):
        evolve(bot.splits(), bot.reward, agent=bot, strategy=WORLD.strategy,
               artifact=Artifact("skills/other", Kind.SKILL, "# Other\n"), budget=SMALL, store=tmp_path)


def _spawn(store: Path, mode: str, seed: int, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(HELPER), str(store), mode, str(seed), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(store: Path, mode: str, seed: int) -> None:
    final = _spawn(store, mode, seed)
    out, err = final.communicate(timeout=120)
    assert final.returncode == 0, err[-2000:]
    assert '"ok": true' in out


def _check_run_directory(store: Path) -> list[str]:
    """Every invariant a run directory must keep, however often it was killed; the committed diff ids."""
    committed = check_commits(store)
    logged = dispatched(store)
    for kind in ("rollouts", "proposals", "gate_evals"):
        assert logged[kind] <= killable_run.BUDGET.limit(kind), (store, kind, logged[kind])
    steps = [p["step"] for _, p in events(store, ["step"])]
    assert steps == list(range(len(steps))), f"{store}: steps logged out of order or twice"
    done = [p["step"] for _, p in events(store, ["step_done"])]
    assert done == steps, f"{store}: a step was never finished, or finished twice"
    report = replay_store(store)
    assert report.identical, report.mismatches
    return committed


@pytest.mark.parametrize(("mode", "point"), [("sync", "step:1"), ("async", "step:2"), ("sync", "step_done:1"),
                                             ("async", "proposal:3")])
def test_kill_9_at_an_exact_point_then_resume(tmp_path: Path, mode: str, point: str) -> None:
    proc = _spawn(tmp_path, mode, 7, point)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    kind = point.split(":")[0]
    before = events(tmp_path)
    if kind in ("step", "step_done"):  # the callbacks hear of a step once its one transaction has committed
        assert [p["step"] for k, p in before if k == "step"] == [p["step"] for k, p in before if k == "step_done"]
    else:
        assert before[-1][0] == kind  # it died right after that event
    proposed = {p["diff"]["id"] for k, p in before if k == "proposal"}
    _finish(tmp_path, mode, 7)
    _check_run_directory(tmp_path)
    with SQLiteStore(tmp_path, git=False) as lib:
        decided = {d.diff_id for d in lib.decisions()}
    assert proposed <= decided  # work in flight at the kill was evaluated (or accounted) afterwards


def test_a_step_after_the_last_checkpoint_is_refused_as_a_foreign_log(tmp_path: Path) -> None:
    run(tmp_path, agent(), budget=SMALL, asynchronous=False)
    conn = sqlite3.connect(tmp_path / "agentgrad.db")
    conn.execute("DELETE FROM run_state WHERE key = 'checkpoint'")  # what an older agentgrad could leave
    conn.commit()
    conn.close()
    again = run(tmp_path, agent(), budget=SMALL, asynchronous=False)
    assert not again.ok
    assert "after the last checkpoint" in str(again.error)


def _trial(store: Path, mode: str, seed: int) -> int:
    """Start the run, kill it with SIGKILL at seeded random moments (twice), then let it finish; the kills."""
    rng = random.Random(seed)
    kills = 0
    for _ in range(2):
        proc = _spawn(store, mode, seed)
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.0, 0.6))  # a short run (group commit made it faster): die early enough
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.communicate(timeout=60)
    _finish(store, mode, seed)
    return kills


def test_kill_9_at_random_points_loses_and_duplicates_no_commit(tmp_path: Path) -> None:
    trials = [(tmp_path / f"run{i}", "async" if i % 2 else "sync", 100 + i) for i in range(6)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        kills = list(pool.map(lambda t: _trial(*t), trials))
    assert sum(kills) >= len(trials), kills  # most sessions really died mid-run
    for store, _, _ in trials:
        assert _check_run_directory(store), f"{store}: nothing was committed"


def test_wall_time_noted_after_the_last_checkpoint_is_counted_on_resume(tmp_path: Path) -> None:
    from agentgrad.store.events import EventLog

    first = run(tmp_path, agent(), budget=SMALL, asynchronous=False)
    log = EventLog(tmp_path)
    log.put("wall", {"wall_time": first.usage.wall_time + 50.0})  # what a process killed 50 s later leaves
    log.close()
    second = run(tmp_path, agent(), budget=Budget(rollouts=48, proposals=24, gate_evals=480, wall_time=40.0),
                 asynchronous=False)
    assert second.ok, second.error
    assert second.usage.wall_time >= first.usage.wall_time + 50.0
    assert second.usage.rollouts == first.usage.rollouts  # the wall-time budget was already spent


def test_every_rollout_and_its_reward_is_in_the_log(tmp_path: Path) -> None:
    result = run(tmp_path, agent(), budget=SMALL, asynchronous=True)
    rows = [p for _, p in events(tmp_path, ["rollout"])]
    assert len(rows) == result.usage.rollouts > 0
    assert all(0.0 <= p["reward"] <= 1.0 and p["task"] in {t.id for t in agent().splits().train} for p in rows)
    assert {p["reward"] for p in rows} <= {0.0, 1.0} and any(p["reward"] == 0.0 for p in rows)


def test_a_resume_on_a_store_and_log_that_disagree_is_refused_as_damaged(tmp_path: Path) -> None:
    first = run(tmp_path, agent(), budget=SMALL, asynchronous=False)
    assert len(first.history) > 1
    conn = sqlite3.connect(tmp_path / "agentgrad.db")
    conn.execute("DELETE FROM events WHERE kind = 'commit'")  # a damaged page that took the log's commits with it
    conn.commit()
    conn.close()
    with pytest.raises(DamagedStoreError, match=r"the event log names 0 commits of .* and the store holds"):
        run(tmp_path, agent(), budget=SMALL, asynchronous=False)


def test_a_resume_on_a_file_that_fails_its_integrity_check_is_refused(tmp_path: Path) -> None:
    run(tmp_path, agent(), budget=SMALL, asynchronous=False)
    db = tmp_path / "agentgrad.db"
    data = bytearray(db.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    for number in range(2, len(data) // page):  # every page's b-tree header, past the file header (page 1)
        data[number * page: number * page + 12] = b"\x55" * 12
    db.write_bytes(bytes(data))
    with pytest.raises(DamagedStoreError):
        run(tmp_path, agent(), budget=SMALL, asynchronous=False)


@pytest.mark.slow
def test_random_8_kib_overwrites_of_the_database_never_resume_silently(tmp_path: Path) -> None:
    template = tmp_path / "template"
    first = run(template, agent(), budget=SMALL, asynchronous=False)
    spent = (first.usage.rollouts, first.usage.proposals, first.usage.gate_evals)
    rng = random.Random(8)
    outcomes: Counter[str] = Counter()
    for trial in range(50):
        store = tmp_path / f"t{trial}"
        shutil.copytree(template, store)
        db = store / "agentgrad.db"
        data = bytearray(db.read_bytes())
        at = rng.randrange(0, max(1, len(data) - 8192))
        data[at:at + 8192] = rng.randbytes(8192)
        db.write_bytes(bytes(data))
        try:
            again = run(store, agent(), budget=SMALL, asynchronous=False)
        except AgentgradError:  # refused with a typed error (a raw driver error would fail the test)
            outcomes["refused"] += 1
            continue
        if again.error is not None:
            assert isinstance(again.error, AgentgradError), again.error  # a typed error, never a raw one
            outcomes["failed loudly"] += 1
            continue
        # it resumed: the damage hit no live page, and nothing spent was forgotten
        now = (again.usage.rollouts, again.usage.proposals, again.usage.gate_evals)
        assert all(n >= s for n, s in zip(now, spent, strict=True)), (trial, now, spent)
        outcomes["resumed intact"] += 1
    assert outcomes["refused"] + outcomes["failed loudly"] >= 25, outcomes
