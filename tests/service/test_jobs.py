"""Jobs run in worker processes, obey per-token limits, cancel and resume, and come back when a worker dies."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from fastapi.testclient import TestClient

from agentgrad.cli.rundir import process_alive
from agentgrad.store.events import EventLog
from agentgrad.store.sqlite import SQLiteStore
from tests.service.support import ARTIFACT, ONE_JOB_TOKEN, auth, client, job_state, start, wait_for, wait_state, world

SLOW = world(median=0.03)  # a few seconds of run: time to look at it while it goes


def _committed(run_dir: Path) -> list[str]:
    """The store's committed diff ids, checked against the log's commit events (no commit lost or doubled)."""
    with SQLiteStore(run_dir, git=False) as store:
        history = store.history(ARTIFACT)
    log = EventLog(run_dir, readonly=True)
    try:
        logged = sorted((int(e.payload["version"]), str(e.payload["diff"])) for e in log.read(["commit"]))
    finally:
        log.close()
    assert [v.number for v in history] == list(range(len(history)))
    assert logged == [(v.number, str(v.diff_id)) for v in history[1:]]
    return [str(v.diff_id) for v in history[1:]]


def _commits(api: TestClient, job_id: str) -> int:
    response = api.get(f"/api/runs/{job_id}/usage", headers=auth())
    return int(response.json()["commits"]) if response.status_code == 200 else 0


def test_a_started_run_executes_in_a_worker_process_and_finishes(tmp_path: Path) -> None:
    with client(tmp_path) as api:
        job = start(api, world())
        assert job["state"] == "running" and job["pid"] not in (None, os.getpid())
        done = wait_state(api, job["id"], ["finished", "failed"])
        assert done["state"] == "finished" and done["pid"] is None and done["restarts"] == 0
        assert not process_alive(job["pid"])
        assert _committed(tmp_path / "runs" / job["id"])


def test_a_token_cannot_have_more_active_jobs_than_its_limit(tmp_path: Path) -> None:
    with client(tmp_path) as api:
        first = start(api, SLOW, token=ONE_JOB_TOKEN)
        refused = api.post("/api/runs", json={"config": world()}, headers=auth(ONE_JOB_TOKEN))
        assert refused.status_code == 429 and refused.json()["error"]["type"] == "concurrency_limit"
        assert refused.headers["retry-after"] == "5"
        start(api, world())  # another token has its own limit
        assert api.post(f"/api/runs/{first['id']}/cancel", headers=auth(ONE_JOB_TOKEN)).status_code == 202
        wait_state(api, first["id"], ["cancelled", "finished"])
        start(api, world(), token=ONE_JOB_TOKEN)


def test_a_cancelled_run_resumes_where_it_stopped_and_finishes(tmp_path: Path) -> None:
    with client(tmp_path) as api:
        job = start(api, SLOW)
        run_dir = tmp_path / "runs" / job["id"]
        wait_for(lambda: _commits(api, job["id"]) >= 1, what="a first commit")
        assert api.post(f"/api/runs/{job['id']}/cancel", headers=auth()).json()["state"] == "cancelling"
        assert wait_state(api, job["id"], ["cancelled", "finished"])["state"] == "cancelled"
        before = _committed(run_dir)
        again = api.post(f"/api/runs/{job['id']}/cancel", headers=auth())
        assert again.status_code == 409 and "only a running job" in again.json()["error"]["message"]
        assert api.post(f"/api/runs/{job['id']}/resume", headers=auth()).json()["state"] == "running"
        assert wait_state(api, job["id"], ["finished", "failed"])["state"] == "finished"
        after = _committed(run_dir)
        assert after[:len(before)] == before and len(after) >= len(before)
        log = EventLog(run_dir, readonly=True)
        try:
            assert log.count("resumed") == 1
        finally:
            log.close()
        finished = api.post(f"/api/runs/{job['id']}/resume", headers=auth())
        assert finished.status_code == 409


def test_a_job_whose_worker_was_killed_is_resumed_by_the_supervisor(tmp_path: Path) -> None:
    with client(tmp_path) as api:
        job = start(api, SLOW)
        run_dir = tmp_path / "runs" / job["id"]
        wait_for(lambda: _commits(api, job["id"]) >= 1, what="a first commit")
        before = _committed(run_dir)
        os.kill(job["pid"], signal.SIGKILL)
        wait_for(lambda: job_state(api, job["id"])["restarts"] == 1, what="the worker to be restarted")
        done = wait_state(api, job["id"], ["finished", "failed"])
        assert done["state"] == "finished" and done["pid"] != job["pid"]
        after = _committed(run_dir)
        assert after[:len(before)] == before


HOOKED = """[task]
set = "dates"

[model]
run = "hook_probe:run"
propose = "hook_probe:propose"

[budget]
calls = 6
"""
PROBE = """import pathlib
pathlib.Path(__file__).with_name("imported-by-" + str(__import__("os").getpid())).write_text("x")


def run(prompt, task):
    return "no"


def propose(prompt, task, output, reward):
    return []
"""


def test_a_submitted_configuration_is_checked_without_importing_its_functions_in_the_web_process(
        tmp_path: Path) -> None:
    (tmp_path / "hook_probe.py").write_text(PROBE)
    with client(tmp_path) as api:
        job = start(api, HOOKED)
        assert "hook_probe" not in sys.modules  # the web process checked the names by form only
        assert not (tmp_path / f"imported-by-{os.getpid()}").exists()
        wait_state(api, job["id"], ["finished", "failed"])
        assert [p.name for p in tmp_path.glob("imported-by-*")] == [f"imported-by-{job['pid']}"]  # the worker did
        bad = api.post("/api/runs", json={"config": HOOKED.replace("hook_probe:run", "hook probe!")}, headers=auth())
        assert bad.status_code == 422 and "module:function" in bad.text
