"""Every command on a run directory a killed process left behind, and on a directory that holds no run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentgrad.cli.config import read_source
from agentgrad.cli.rundir import RunDir
from agentgrad.store.events import EventLog
from agentgrad.store.sqlite import SQLiteStore
from tests.cli.helpers import ARTIFACT, check_consistent, cli, dispatched, events, world_config

COMMANDS = [["resume"], ["status"], ["log"], ["show"], ["diff", "0", "1"], ["why", "p000001"], ["frontier"],
            ["promote"], ["export", "DEST"], ["report"], ["cancel"]]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_every_command_on_an_empty_directory_fails_cleanly_and_creates_nothing(tmp_path: Path,
                                                                               command: list[str]) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    args = [a if a != "DEST" else str(tmp_path / "out") for a in command[1:]]
    result = cli(command[0], empty, *args)
    assert result.exit_code == 1
    assert result.stderr.strip() == f"error: {empty} holds no agentgrad run (no agentgrad.db)"
    assert list(empty.iterdir()) == []
    missing = cli(command[0], tmp_path / "nowhere", *args)
    assert missing.exit_code == 1 and "does not exist" in missing.stderr


def test_status_of_a_killed_run_says_stopped_and_how_to_resume(killed_run: Path) -> None:
    info = json.loads(cli("status", killed_run, "--json").stdout)
    assert info["state"] == "stopped" and info["pid"] is None
    assert info["hint"] == f"the process is gone; continue with: agentgrad resume {killed_run}"
    assert info["commits"] == 2 and info["artifacts"][ARTIFACT]["dev"] == 2
    assert info["budget"]["rollouts"]["used"] == dispatched(killed_run, "rollouts")


def test_read_commands_work_on_a_killed_run(killed_run: Path, tmp_path: Path) -> None:
    with SQLiteStore(killed_run, git=False) as store:
        history = store.history(ARTIFACT)
        decisions = store.decisions()
    assert len(history) == 3
    assert len(cli("log", killed_run, "--json").stdout.splitlines()) == len(decisions)
    assert cli("show", killed_run).stdout == history[2].text
    assert cli("diff", killed_run, "1", "2").exit_code == 0
    assert history[2].diff_id is not None
    assert "committed as v2" in cli("why", killed_run, history[2].diff_id).stdout
    assert cli("report", killed_run, "--out", tmp_path / "report").exit_code == 0
    assert cli("cancel", killed_run).exit_code == 0
    assert cli("export", killed_run, tmp_path / "lib", "--dev").exit_code == 0
    assert (tmp_path / "lib" / ARTIFACT).read_text() == history[2].text
    assert cli("promote", killed_run).exit_code == 0


def test_resume_finishes_a_killed_run_without_losing_or_repeating_a_commit(killed_run: Path) -> None:
    before = check_consistent(killed_run)
    result = cli("resume", killed_run, "--quiet")
    assert result.exit_code == 0, result.output
    after = check_consistent(killed_run)
    assert after[:len(before)] == before and len(after) >= len(before)
    assert [k for k, _ in events(killed_run, ["resumed", "finished"])] == ["resumed", "finished"]
    assert dispatched(killed_run, "rollouts") <= 48 and dispatched(killed_run, "gate_evals") <= 400
    assert json.loads(cli("status", killed_run, "--json").stdout)["state"] == "finished"


def test_run_may_reuse_a_directory_where_a_run_never_started(tmp_path: Path) -> None:
    config = world_config(tmp_path)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    RunDir(run_dir).save_config(read_source(config))  # as a `run` that died before evolve began
    assert json.loads(cli("status", run_dir, "--json").stdout)["state"] == "not started"
    assert cli("run", config, "--run-dir", run_dir, "--quiet").exit_code == 0


def test_resume_refuses_a_run_not_started_by_the_cli(tmp_path: Path) -> None:
    log = EventLog(tmp_path)
    log.append("dispatch", {"call": 0, "kind": "rollouts", "reserved": {"rollouts": 1.0}})
    log.close()
    result = cli("resume", tmp_path)
    assert result.exit_code == 1 and "not started by the agentgrad CLI" in result.stderr


@pytest.mark.parametrize("command", [["status"], ["log"], ["report"]], ids=lambda c: c[0])
def test_a_file_that_is_not_a_database_is_reported_not_opened(tmp_path: Path, command: list[str]) -> None:
    (tmp_path / "agentgrad.db").write_bytes(b"this is not a database, just some bytes" * 10)
    result = cli(command[0], tmp_path)
    assert result.exit_code == 1 and "is not a readable agentgrad database" in result.stderr
