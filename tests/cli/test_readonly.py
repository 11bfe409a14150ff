"""Read commands write nothing: status, show, log, report-free reads and export leave the run's files as they were."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from agentgrad.store.events import EventLog
from agentgrad.store.sqlite import SQLiteStore
from tests.cli.helpers import cli
from tests.runtime.helpers import WORLD, agent, run


def _files(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.fixture
def done(tmp_path: Path) -> Path:
    run(tmp_path / "run", agent(), asynchronous=False)
    return tmp_path / "run"


def test_read_commands_leave_the_run_database_as_it_was(done: Path, tmp_path: Path) -> None:
    before = _files(done)["agentgrad.db"]
    for args in (("status", done), ("show", done), ("export", done, tmp_path / "out")):
        result = cli(*args)
        assert result.exit_code == 0, (args, result.output)
    assert _files(done)["agentgrad.db"] == before  # (SQLite may add its empty shared-memory side files)
    assert (tmp_path / "out" / WORLD.artifact.id).is_file()


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root to become another user")
def test_status_and_show_work_on_a_run_directory_the_user_cannot_write() -> None:
    other = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable]
    probe = subprocess.run([*other, "-c", "import agentgrad"], capture_output=True, text=True, timeout=60, cwd="/")
    if probe.returncode != 0:  # e.g. the checkout lives in a folder only its owner may read
        pytest.skip("the other user cannot import agentgrad from this checkout")
    folder = Path(tempfile.mkdtemp(prefix="agentgrad-ro-"))
    try:
        run(folder / "run", agent(), asynchronous=False)
        for path in [folder, *folder.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)  # owned by root: another user may read, not write
        for command in ("status", "show"):
            done = subprocess.run([*other, "-m", "agentgrad", command, str(folder / "run")], capture_output=True,
                                  text=True, timeout=120, cwd="/")
            assert done.returncode == 0, (command, done.stderr[-2000:])
        assert "use method" in done.stdout
    finally:
        shutil.rmtree(folder)


def test_a_read_only_store_and_log_refuse_writes(done: Path) -> None:
    with SQLiteStore(done, readonly=True) as store:
        assert store.head(WORLD.artifact.id).number >= 0
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            store.journal.put("note", {"x": 1})
    log = EventLog(done, readonly=True)
    assert log.count("dispatch") > 0
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        log.append("note", {"x": 1})
    log.close()


def test_export_to_a_path_that_cannot_be_written_says_so_without_a_traceback(done: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    result = cli("export", done, blocker / "out")
    assert result.exit_code != 0
    assert "cannot use" in result.output and "Traceback" not in result.output


def test_fsck_passes_a_sound_run_and_names_what_is_damaged(done: Path) -> None:
    before = _files(done)["agentgrad.db"]
    result = cli("fsck", done)
    assert result.exit_code == 0, result.output
    assert result.output.count("ok  ") >= 4 and "DAMAGED" not in result.output
    assert _files(done)["agentgrad.db"] == before  # it wrote nothing
    shutil.rmtree(done / "library.git")
    conn = sqlite3.connect(done / "agentgrad.db")
    conn.execute("DELETE FROM events WHERE kind = 'commit'")
    conn.commit()
    conn.close()
    damaged = cli("fsck", done, "--json")
    assert damaged.exit_code != 0
    report = json.loads(damaged.stdout)
    bad = {f["check"].split(":")[0] for f in report["findings"] if not f["ok"]}
    assert not report["ok"] and bad == {"log and store", "git mirror"}
