"""Real processes: Ctrl-C (SIGINT) stops a run cleanly and leaves a resumable store; `run --detach` survives its
parent and `cancel` stops it. These tests wait on real time (a few seconds each)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

from agentgrad.cli.rundir import process_alive
from tests.cli.helpers import (
    check_consistent,
    cli,
    cli_process,
    count_events,
    dispatched,
    events,
    start_process,
    wait_until,
    world_config,
)

# Real latency and a wall-time budget: long enough to interrupt, short enough to finish when resumed.
SLOW_BUDGET = "wall_time = 2.0\ngate_evals = 100000"


def _pid(run_dir: Path) -> int | None:
    try:
        return int((run_dir / "run.pid").read_text())
    except (OSError, ValueError):
        return None


def _cancelled_calls(run_dir: Path) -> list[dict[str, Any]]:
    return [p for _, p in events(run_dir, ["done"]) if p["error"] == "cancelled"]


def test_ctrl_c_stops_cleanly_and_the_run_resumes(tmp_path: Path) -> None:
    config = world_config(tmp_path, median=0.004, budget=SLOW_BUDGET)
    run_dir = tmp_path / "run"
    process = start_process("run", config, "--run-dir", run_dir, "--quiet")
    try:
        wait_until(lambda: count_events(run_dir, "commit") >= 1, what="a first commit")
        process.send_signal(signal.SIGINT)
        _out, err = process.communicate(timeout=30)
    finally:
        process.kill()  # no-op once it has exited
        process.wait()
    assert process.returncode == 130, err
    assert f"continue with: agentgrad resume {run_dir}" in err and "Traceback" not in err
    committed = check_consistent(run_dir)
    assert committed
    calls = {p["call"] for _, p in events(run_dir, ["dispatch"])}
    assert calls == {p["call"] for _, p in events(run_dir, ["done"])}  # every call in flight was accounted
    assert all(p["actual"][p["kind"]] == 1.0 for p in _cancelled_calls(run_dir))  # charged, as a resume counts
    assert not (run_dir / "run.pid").exists()
    assert json.loads(cli("status", run_dir, "--json").stdout)["state"] == "interrupted"
    resumed = cli("resume", run_dir, "--quiet")
    assert resumed.exit_code == 0, resumed.output
    assert check_consistent(run_dir)[:len(committed)] == committed
    assert json.loads(cli("status", run_dir, "--json").stdout)["state"] == "finished"


def test_detached_run_is_cancelled_and_then_resumed(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    try:
        _detach_cancel_resume(tmp_path, run_dir)
    finally:
        pid = _pid(run_dir)
        if pid is not None and process_alive(pid):  # a failed assertion must not leave the run going
            os.kill(pid, signal.SIGKILL)


def _detach_cancel_resume(tmp_path: Path, run_dir: Path) -> None:
    config = world_config(tmp_path, median=0.004, budget=SLOW_BUDGET)
    started = cli_process("run", config, "--run-dir", run_dir, "--detach", "--json")
    assert started.returncode == 0, started.stderr
    info = json.loads(started.stdout)
    assert info["pid"] == _pid(run_dir) and Path(info["log"]) == run_dir / "run.log"
    wait_until(lambda: count_events(run_dir, "done") >= 20, what="the detached run to work")
    running = json.loads(cli("status", run_dir, "--json").stdout)
    assert running["state"] == "running" and running["pid"] == info["pid"]
    assert cli("resume", run_dir).exit_code == 1  # one process per run directory
    cancelled = cli_process("cancel", run_dir)
    assert cancelled.returncode == 0, cancelled.stderr
    assert f"stopped process {info['pid']}" in cancelled.stdout
    log = (run_dir / "run.log").read_text()
    assert "continue with: agentgrad resume" in log
    assert json.loads(log.splitlines()[0])["event"] == "started"
    check_consistent(run_dir)
    assert json.loads(cli("status", run_dir, "--json").stdout)["state"] == "interrupted"
    assert cli("resume", run_dir, "--quiet").exit_code == 0
    assert dispatched(run_dir, "rollouts") == json.loads(cli("status", run_dir, "--json").stdout)["budget"][
        "rollouts"]["used"]
