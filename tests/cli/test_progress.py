"""Progress: the counters the live view keeps from the event log, the panel it draws, and the JSON event lines."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from agentgrad.cli.config import load_config
from agentgrad.cli.launch import launch
from agentgrad.cli.progress import LiveProgress, duration, panel
from agentgrad.cli.rundir import RunDir
from agentgrad.cli.stats import RunStats, sparkline
from agentgrad.store.events import Event
from tests.cli.helpers import dispatched, world_config

CONFIG = {"budget": {"rollouts": 10, "proposals": None, "gate_evals": 100, "tokens": None, "cost": 2.0,
                     "wall_time": None}, "run": {"workers": {"slots": 4}}}


def _events(*items: tuple[str, float, dict[str, object]]) -> list[Event]:
    return [Event(i + 1, kind, at, payload) for i, (kind, at, payload) in enumerate(items)]


def _stats(*items: tuple[str, float, dict[str, object]]) -> RunStats:
    stats = RunStats()
    stats.configure(CONFIG)
    stats.feed(_events(*items))
    return stats


def _dispatch(call: int, kind: str, at: float) -> tuple[str, float, dict[str, object]]:
    return "dispatch", at, {"call": call, "kind": kind, "reserved": {kind: 1.0, "cost": 0.05}}


def _done(call: int, kind: str, at: float, seconds: float = 0.5, error: str | None = None
          ) -> tuple[str, float, dict[str, object]]:
    return "done", at, {"call": call, "kind": kind, "task": "t", "actual": {kind: 1.0, "tokens": 10.0, "cost": 0.01},
                        "error": error, "seconds": seconds}


def test_calls_in_flight_are_dispatched_minus_done_and_charged_their_reservation() -> None:
    stats = _stats(_dispatch(0, "rollouts", 0.0), _dispatch(1, "rollouts", 0.1), _dispatch(2, "gate_evals", 0.2),
                   _done(0, "rollouts", 1.0))
    assert (stats.in_flight("rollouts"), stats.in_flight("gate_evals"), stats.done["rollouts"]) == (1, 1, 1)
    used = stats.used()
    assert used["rollouts"] == 2.0 and used["gate_evals"] == 1.0
    assert abs(used["cost"] - (0.01 + 2 * 0.05)) < 1e-12 and used["tokens"] == 10.0


def test_a_resume_keeps_the_dead_process_calls_charged_and_starts_a_new_session() -> None:
    stats = _stats(_dispatch(0, "rollouts", 0.0), ("failed", 1.0, {"error": "x"}),
                   ("resumed", 50.0, {"steps": 0}), _dispatch(1, "rollouts", 50.5), _done(1, "rollouts", 51.0))
    assert stats.in_flight("rollouts") == 0 and stats.used()["rollouts"] == 2.0
    assert stats.failed is None and stats.resumes == 1 and stats.session_at == 50.0
    assert stats.rate(["rollouts"], now=52.0) == 0.5  # one call over the two seconds of this session
    assert stats.eta(now=52.0) == 8.0 / 0.5  # 8 rollouts left at 0.5 per second


def test_rate_limit_is_slots_over_mean_call_time() -> None:
    stats = _stats(_dispatch(0, "rollouts", 0.0), _done(0, "rollouts", 1.0, seconds=0.5),
                   _dispatch(1, "gate_evals", 0.0), _done(1, "gate_evals", 2.0, seconds=1.5))
    assert stats.rate_limit() == 4 / 1.0


def test_verdicts_count_the_latest_final_outcome_per_diff_and_tabu_skips() -> None:
    def decision(diff: str, outcome: str) -> tuple[str, float, dict[str, object]]:
        return "decision", 1.0, {"diff_id": diff, "outcome": outcome, "stage": "s", "reason": "r"}

    stats = _stats(decision("a", "recheck"), decision("a", "accepted"), decision("b", "rejected"),
                   decision("c", "deferred"), ("proposal_failed", 1.0, {"kind": "tabu_skips"}))
    assert stats.outcome_counts() == {"accepted": 1, "rejected": 1, "tabu": 1}
    assert stats.pending() == 1


def test_validation_reward_of_each_version_comes_from_the_gate_evidence() -> None:
    candidate = {"diff": {"id": "p1"}, "evidence": {"base_version": 0, "rows": [["t1", 0.0, 1.0], ["t2", 1.0, 1.0]]}}
    stats = _stats(("step", 1.0, {"candidates": [candidate]}),
                   ("commit", 1.0, {"artifact": "a", "version": 1, "diff": "p1"}))
    assert stats.val_rewards() == {0: 0.5, 1: 1.0}
    assert stats.val_history() == [0.5, 1.0]


def test_sparkline_and_duration_read_well() -> None:
    assert sparkline([0.0, 0.5, 1.0]) == "▁▅█"
    assert len(sparkline([0.1] * 50, width=30)) == 30
    assert (duration(4.25), duration(185), duration(3725)) == ("4.2 s", "3 min 05 s", "1 h 02 min")


def test_panel_shows_stages_budget_and_reward() -> None:
    candidate = {"diff": {"id": "p1"}, "evidence": {"base_version": 0, "rows": [["t1", 0.0, 1.0]]}}
    stats = _stats(_dispatch(0, "rollouts", 0.0), _done(0, "rollouts", 1.0), _dispatch(1, "gate_evals", 1.0),
                   ("step", 1.0, {"candidates": [candidate]}), ("commit", 1.0, {"version": 1, "diff": "p1"}))
    console = Console(record=True, width=120, file=io.StringIO())
    console.print(panel(stats, "run", now=2.0))
    text = console.export_text()
    assert "rollouts" in text and "gate evals" in text
    assert "best validation reward 1.000" in text and "▁█" in text
    assert "cost $0.06 / $2.00" in text


def test_live_progress_follows_a_real_run_to_its_end(tmp_path: Path) -> None:
    source, config = load_config(world_config(tmp_path))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    RunDir(run_dir).save_config(source)
    console = Console(record=True, width=120, file=io.StringIO(), force_terminal=True)
    with LiveProgress(run_dir, console, min_interval=0.0) as live:
        result = launch(config, source, run_dir, [live])
    assert result.ok
    assert live.stats.done["rollouts"] == dispatched(run_dir, "rollouts") == result.usage.rollouts
    assert live.stats.state() == "finished" and live.stats.in_flight("gate_evals") == 0
    assert f"proposals {live.stats.proposals}" in console.export_text()
