"""`in_subprocess`: a synchronous user function run in a worker process; a call that hangs is cut off at the
timeout and its process is killed, while the run goes on and ends; functions a worker cannot import are refused."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from agentgrad.errors import ConfigError
from agentgrad.runtime.accounts import NEVER_STARTED
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.config import RunConfig
from agentgrad.runtime.isolated import in_subprocess
from tests.runtime import isolated_run
from tests.runtime.helpers import agent, events, run


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


@pytest.mark.slow
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_hung_sync_run_in_a_subprocess_is_killed_at_its_timeout_and_the_run_learns_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, asynchronous: bool) -> None:
    mark = tmp_path / "hung"
    monkeypatch.setenv(isolated_run.MARK, str(mark))
    started = time.monotonic()
    result = run(tmp_path / "run", agent(), run=in_subprocess(isolated_run.solve, processes=4),
                 config=RunConfig(timeout=10.0), budget=Budget(calls=80), asynchronous=asynchronous)
    assert result.ok, result.error
    assert time.monotonic() - started < 60  # the hung call held nothing back for its ten minutes
    assert len(result.history) > 1  # the other calls' answers came back: it learned
    errors = [p["error"] for _, p in events(tmp_path / "run", ["done"]) if p["error"] not in (None, NEVER_STARTED)]
    assert [e for e in errors if "timed out" in e] == ["timed out after 10 s"]  # the hung call, cut off
    cut = [e for e in errors if e != "cancelled" and not e.startswith("no answer after")]  # the end, or a hedge
    assert cut == ["timed out after 10 s"]
    pid = int(mark.read_text())
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)  # its worker process was killed, not left running


async def _async_run(rendered: str, task: object) -> str:
    return "failed"


def test_functions_a_worker_process_cannot_find_are_refused() -> None:
    with pytest.raises(ConfigError, match="cannot be found by a worker process"):
        in_subprocess(lambda rendered, task: "x")
    with pytest.raises(ConfigError, match="is async"):
        in_subprocess(_async_run)
    with pytest.raises(ConfigError, match="takes a function, got int"):
        in_subprocess(42)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^in_subprocess: processes must be an int >= 1, got 0$"):
        in_subprocess(isolated_run.solve, processes=0)
    with pytest.raises(ConfigError, match=r"^in_subprocess: processes must be an int >= 1, got '2'$"):
        in_subprocess(isolated_run.solve, processes="2")  # type: ignore[arg-type]
