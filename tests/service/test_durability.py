"""Jobs survive the service: SIGKILL the service mid-run (its worker alive, or killed too), start it again, and the
job is re-attached or resumed and finishes with every commit the store had before the kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from agentgrad.cli.rundir import process_alive
from agentgrad.store.events import EventLog
from tests.service.support import WRITE_TOKEN, auth, free_port, wait_for, world
from tests.service.test_jobs import _committed

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def service_process(home: Path, port: int) -> Iterator[subprocess.Popen[bytes]]:
    """`agentgrad serve` as a real process on 127.0.0.1:`port`; stopped at the end unless already dead."""
    tokens = home / "tokens.json"
    if not tokens.exists():
        from agentgrad.service.auth import hash_token

        tokens.write_text(json.dumps({"tokens": [{"name": "t", "sha256": hash_token(WRITE_TOKEN),
                                                  "scopes": ["read", "write"]}]}))
    command = [sys.executable, "-m", "agentgrad", "serve", "--home", str(home), "--port", str(port), "--tokens",
               str(tokens), "--log-level", "warning"]
    with (home / "service.log").open("ab") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                                   env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        wait_for(lambda: _answers(port), timeout=30, what="the service to answer")
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            process.wait(timeout=20)


def _logs(home: Path, run_dir: Path) -> str:
    """The service's and the worker's output, to say why a worker was restarted more often than expected."""
    texts = [(path.name, path.read_text(errors="replace")[-3000:]) for path in (home / "service.log",
                                                                                 run_dir / "run.log")
             if path.exists()]
    return "\n".join(f"--- {name}\n{text}" for name, text in texts)


def _answers(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/api/runs", headers=auth(), timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def _job(port: int, job_id: str) -> dict[str, object]:
    job: dict[str, object] = httpx.get(f"http://127.0.0.1:{port}/api/runs/{job_id}", headers=auth()).json()["job"]
    return job


def _commits(port: int, job_id: str) -> int:
    response = httpx.get(f"http://127.0.0.1:{port}/api/runs/{job_id}/usage", headers=auth())
    return int(response.json()["commits"]) if response.status_code == 200 else 0


@pytest.mark.slow
@pytest.mark.parametrize("worker_dies", [False, True], ids=["worker-survives", "worker-killed-too"])
def test_a_job_outlives_a_sigkilled_service_and_finishes_with_no_lost_commit(tmp_path: Path,
                                                                             worker_dies: bool) -> None:
    port = free_port()
    with service_process(tmp_path, port) as service:
        created = httpx.post(f"http://127.0.0.1:{port}/api/runs", json={"config": world(median=0.05)},
                             headers=auth(), timeout=30)
        assert created.status_code == 201, created.text
        job_id, worker = created.json()["id"], int(created.json()["pid"])
        wait_for(lambda: _commits(port, job_id) >= 1, timeout=60, what="a first commit")
        service.send_signal(signal.SIGKILL)
        service.wait(timeout=10)
    run_dir = tmp_path / "runs" / job_id
    before = _committed(run_dir)
    assert before and process_alive(worker)
    if worker_dies:
        os.kill(worker, signal.SIGKILL)
        wait_for(lambda: not process_alive(worker), timeout=10, what="the worker to die")
    with service_process(tmp_path, port):
        wait_for(lambda: _job(port, job_id)["state"] != "running", timeout=90, what="the job to end")
        job = _job(port, job_id)
    assert job["state"] == "finished", job
    assert job["restarts"] == (1 if worker_dies else 0), _logs(tmp_path, run_dir)
    after = _committed(run_dir)
    assert after[:len(before)] == before and len(after) >= len(before)
    log = EventLog(run_dir, readonly=True)
    try:
        assert log.count("resumed") == (1 if worker_dies else 0)
        assert log.count("finished") == 1
    finally:
        log.close()
