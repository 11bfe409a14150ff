"""Bad input to the commands ends in one ``error:`` line and a non-zero exit, never a traceback: a database that is
no store, a version number past what the store can hold, a nonsense timeout; and a ``run.pid`` that names no
single process (``-1``, ``0``, a huge number) is never signalled."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import Result

from agentgrad.cli.rundir import RunDir
from tests.cli.helpers import cli, world_config


def _foreign(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.commit()
    conn.close()


NOT_A_STORE: dict[str, tuple[Callable[[Path], object], str]] = {
    "empty file": (lambda p: p.write_bytes(b""), "holds no agentgrad store"),
    "another SQLite file": (_foreign, "is not an agentgrad store: an SQLite database of something else"),
}
COMMANDS = [["status"], ["log"], ["show"], ["why", "d1"], ["frontier"], ["promote"], ["report"], ["resume"]]


def _one_error_line(result: Result, code: int) -> str:
    assert result.exit_code == code, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize("damage", list(NOT_A_STORE))
def test_a_database_that_is_no_store_is_one_error_line_for_every_command(tmp_path: Path, damage: str,
                                                                         command: list[str]) -> None:
    make, says = NOT_A_STORE[damage]
    make(tmp_path / "agentgrad.db")
    assert says in _one_error_line(cli(command[0], tmp_path, *command[1:]), 1)


@pytest.mark.parametrize("damage", [*NOT_A_STORE, "a directory"])
def test_run_into_a_directory_whose_database_is_no_store_is_refused(tmp_path: Path, damage: str) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    make = NOT_A_STORE[damage][0] if damage in NOT_A_STORE else Path.mkdir
    make(run_dir / "agentgrad.db")
    _one_error_line(cli("run", world_config(tmp_path), "--run-dir", run_dir, "--quiet"), 1)


@pytest.mark.parametrize("args", [["show", "--version", str(10**30)], ["diff", str(2**63), "0"]],
                         ids=["show", "diff"])
def test_a_version_past_what_the_store_holds_is_an_unknown_version(finished_run: Path, args: list[str]) -> None:
    line = _one_error_line(cli(args[0], finished_run, *args[1:]), 1)
    assert "has no version" in line


@pytest.mark.parametrize("timeout", ["nan", "-1"])
def test_cancel_refuses_a_timeout_that_is_no_number_of_seconds(finished_run: Path, timeout: str) -> None:
    assert "--timeout (seconds) must be" in _one_error_line(cli("cancel", finished_run, "--timeout", timeout), 2)


@pytest.mark.parametrize("pid", ["-1", "0", str(2**70), "not a pid"])
def test_a_run_pid_that_names_no_single_process_is_never_signalled(finished_run: Path, pid: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(os, "kill", lambda target, sig: sent.append((target, sig)))
    (finished_run / "run.pid").write_text(pid)
    assert RunDir(finished_run).running_pid() is None
    result = cli("cancel", finished_run)
    assert result.exit_code == 0 and "is not running" in result.stdout
    assert cli("status", finished_run).exit_code == 0
    assert sent == []
