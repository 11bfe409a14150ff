"""Shared pieces of the CLI tests: configuration files, running the CLI in-process and as a real process, and
reading a run directory back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from typer.testing import CliRunner, Result

from agentgrad.cli.app import app
from agentgrad.core.decision import Outcome
from agentgrad.store.events import EventLog
from agentgrad.store.sqlite import SQLiteStore
from tests.runtime.helpers import dispatched as started_calls
from tests.runtime.helpers import events as events

ROOT = Path(__file__).resolve().parents[2]
ARTIFACT = "skills/solver"

# A small reference world (4 categories, 10 validation tasks each) where a right rule is accepted at δ = 0.05.
WORLD_TOML = """
[task]
world = {{ seed = 0, n_categories = 4, tasks_per_category = 40, median = {median}, sigma = {sigma} }}

[budget]
{budget}

[run]
workers = 4
seed = 1
promote_every = 0
"""
SMALL_BUDGET = "rollouts = 48\nproposals = 24\ngate_evals = 400"


def world_config(folder: Path, *, median: float = 0.0, sigma: float = 1.0, budget: str = SMALL_BUDGET,
                 name: str = "world.toml") -> Path:
    """Write a reference-world configuration into `folder` and return its path."""
    path = folder / name
    path.write_text(WORLD_TOML.format(median=median, sigma=sigma, budget=budget), encoding="utf-8")
    return path


def cli(*args: str | Path) -> Result:
    """Invoke the CLI in this process (typer's runner); stdout and stderr are kept apart."""
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def cli_process(*args: str | Path, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run ``python -m agentgrad ARGS`` as a real process and wait for it."""
    return subprocess.run([sys.executable, "-m", "agentgrad", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=_env())


def start_process(*args: str | Path) -> subprocess.Popen[str]:
    """Start ``python -m agentgrad ARGS`` without waiting."""
    return subprocess.Popen([sys.executable, "-m", "agentgrad", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT, env=_env())


def _env() -> dict[str, str]:
    return {**os.environ, "COLUMNS": "200", "PYTHONPATH": str(ROOT)}


def wait_until(check: Callable[[], bool], *, timeout: float = 20.0, what: str = "a condition") -> None:
    """Poll `check` until it holds (real processes need real time); fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def count_events(run_dir: Path, kind: str) -> int:
    """How many events of `kind` the run has logged (0 while its database does not exist yet)."""
    if not (run_dir / "agentgrad.db").is_file():
        return 0
    log = EventLog(run_dir)
    try:
        return log.count(kind)
    finally:
        log.close()


def json_lines(text: str) -> list[dict[str, Any]]:
    """Every line of `text` parsed as JSON."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def check_consistent(run_dir: Path) -> list[str]:
    """Assert that the store and the log agree: contiguous versions, each committed diff once, accepted
    verdicts and commit events naming exactly the committed diffs. Returns the committed diff ids."""
    with SQLiteStore(run_dir, git=False) as store:
        history = store.history(ARTIFACT)
        accepted = [d.diff_id for d in store.decisions(outcome=Outcome.ACCEPTED)]
    assert [v.number for v in history] == list(range(len(history)))
    committed = [str(v.diff_id) for v in history[1:]]
    assert len(set(committed)) == len(committed)
    assert sorted(accepted) == sorted(committed)
    logged = [(p["version"], p["diff"]) for _, p in events(run_dir, ["commit"])]
    assert sorted(logged) == [(v.number, v.diff_id) for v in history[1:]]
    return committed


def dispatched(run_dir: Path, kind: str) -> int:
    """Calls of budget kind `kind` the log says were dispatched and started (`tests.runtime.helpers.dispatched`)."""
    return started_calls(run_dir)[kind]
