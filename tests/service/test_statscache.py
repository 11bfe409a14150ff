"""The service's run counters: kept between requests, fed only new events, equal to a full replay of the log, and
never changed under a reader."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from agentgrad.cli.rundir import RunDir
from agentgrad.cli.stats import RunStats
from agentgrad.cli.status import read_stats
from agentgrad.runtime.budget import Budget
from agentgrad.service.statscache import StatsCache
from tests.runtime.helpers import agent, run

SMALL, MORE = Budget(rollouts=12, proposals=6, gate_evals=120), Budget(rollouts=24, proposals=12, gate_evals=240)


def _view(stats: RunStats) -> dict[str, Any]:
    return {"used": stats.used(), "verdicts": dict(stats.outcome_counts()), "commits": len(stats.commits),
            "rewards": stats.val_rewards(), "seq": stats.seq, "done": dict(stats.done), "resumes": stats.resumes}


def test_the_counters_are_read_once_then_only_the_new_events_and_match_a_full_replay(tmp_path: Path) -> None:
    store = tmp_path / "run"
    run(store, agent(), budget=SMALL, asynchronous=False)
    cache, target = StatsCache(), RunDir(store)
    first, checkpoint = cache.read(target)
    replayed, replay_checkpoint = read_stats(target)
    assert _view(first) == _view(replayed) and checkpoint == replay_checkpoint
    read_once = cache.events_read
    assert read_once == replayed.seq
    again, _ = cache.read(target)
    assert cache.events_read == read_once and _view(again) == _view(first)  # nothing new: nothing read
    run(store, agent(), budget=MORE, asynchronous=False)  # the run is resumed with more budget: more events
    later, _ = cache.read(target)
    assert cache.events_read == read_stats(target)[0].seq  # only what the resumed session logged was read
    assert _view(later) == _view(read_stats(target)[0]) and later.seq > first.seq
    assert _view(first) == _view(replayed)  # a snapshot handed out earlier did not change


def test_a_run_directory_made_anew_is_read_from_its_start(tmp_path: Path) -> None:
    store = tmp_path / "run"
    run(store, agent(), budget=MORE, asynchronous=False)
    cache, target = StatsCache(), RunDir(store)
    cache.read(target)
    shutil.rmtree(store)
    run(store, agent(), budget=SMALL, asynchronous=False)
    fresh, _ = cache.read(target)
    assert _view(fresh) == _view(read_stats(target)[0])


def test_the_least_recently_read_runs_are_forgotten_past_the_bound(tmp_path: Path) -> None:
    cache = StatsCache(max_runs=1)
    for name in ("a", "b"):
        run(tmp_path / name, agent(), budget=SMALL, asynchronous=False)
        cache.read(RunDir(tmp_path / name))
    before = cache.events_read
    cache.read(RunDir(tmp_path / "a"))  # forgotten: read whole again
    assert cache.events_read == before + read_stats(RunDir(tmp_path / "a"))[0].seq
