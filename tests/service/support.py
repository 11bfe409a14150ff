"""Shared pieces of the service tests: tokens, configurations, an in-process client, waiting for a job."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from agentgrad.core.decision import Decision, Outcome
from agentgrad.core.diff import Diff
from agentgrad.core.evidence import Evidence, Row
from agentgrad.core.ops import Op
from agentgrad.service.app import build_service, create_app
from agentgrad.service.auth import TokenBook, TokenEntry, hash_token
from agentgrad.service.settings import Settings
from agentgrad.store.sqlite import SQLiteStore

ARTIFACT = "skills/solver"
WRITE_TOKEN, READ_TOKEN, ONE_JOB_TOKEN = "w-" + "a" * 40, "r-" + "b" * 40, "o-" + "c" * 40
TOKENS = [TokenEntry("writer", hash_token(WRITE_TOKEN), frozenset({"read", "write"})),
          TokenEntry("reader", hash_token(READ_TOKEN), frozenset({"read"})),
          TokenEntry("single", hash_token(ONE_JOB_TOKEN), frozenset({"read", "write"}), max_jobs=1)]
WORLD = """[task]
world = {{ seed = 0, n_categories = 4, tasks_per_category = 40, median = {median}, sigma = 0.5 }}

[budget]
rollouts = {rollouts}
proposals = 24
gate_evals = 400

[run]
workers = 4
seed = 1
promote_every = 0
"""


def world(median: float = 0.0, rollouts: int = 48) -> str:
    """A small reference-world configuration; `median` seconds of latency per call make it slower."""
    return WORLD.format(median=median, rollouts=rollouts)


def auth(token: str = WRITE_TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def settings(home: Path, **overrides: Any) -> Settings:
    options: dict[str, Any] = {"supervise_every": 0.1, "stream_poll": 0.02, **overrides}
    return Settings(home=home, **options)


@contextmanager
def client(home: Path, *, tokens: Sequence[TokenEntry] = TOKENS, **overrides: Any) -> Iterator[TestClient]:
    """A client of a service app on `home` whose supervisor runs (as `agentgrad serve` does)."""
    config = settings(home, **overrides)
    service = build_service(config, TokenBook(tokens, default_max_jobs=config.max_jobs))
    try:
        with TestClient(create_app(service), raise_server_exceptions=False) as test_client:
            yield test_client
    finally:
        service.jobs.close()


def start(api: TestClient, config: str, token: str = WRITE_TOKEN, name: str = "run") -> dict[str, Any]:
    response = api.post("/api/runs", json={"config": config, "name": name}, headers=auth(token))
    assert response.status_code == 201, response.text
    job: dict[str, Any] = response.json()
    return job


def wait_for(check: Callable[[], bool], *, timeout: float = 60.0, what: str = "a condition") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def job_state(api: TestClient, job_id: str) -> dict[str, Any]:
    response = api.get(f"/api/runs/{job_id}", headers=auth())
    assert response.status_code == 200, response.text
    job: dict[str, Any] = response.json()["job"]
    return job


def wait_state(api: TestClient, job_id: str, states: Sequence[str], timeout: float = 60.0) -> dict[str, Any]:
    """Wait until the job is in one of `states`; return it."""
    wait_for(lambda: job_state(api, job_id)["state"] in states, timeout=timeout, what=f"job {job_id} in {states}")
    return job_state(api, job_id)


def iter_sse(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    """Parse an SSE stream as it arrives, until its `end` event: each message's id, event and data."""
    current: dict[str, Any] = {}
    for line in lines:
        if not line:
            if current.get("event") == "end":
                return
            if "data" in current:
                yield current
            current = {}
        elif not line.startswith(":"):
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            current[field] = json.loads(value) if field == "data" else value


def sse_events(lines: Iterator[str]) -> list[dict[str, Any]]:
    """Every message of an SSE stream until its `end` event."""
    return list(iter_sse(lines))


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def live_server(home: Path, *, tokens: Sequence[TokenEntry] = TOKENS, **overrides: Any) -> Iterator[str]:
    """A real HTTP server (uvicorn, on a thread, on a free port of 127.0.0.1) for the app on `home`; its URL."""
    import threading

    import uvicorn

    config = settings(home, **overrides)
    service = build_service(config, TokenBook(tokens, default_max_jobs=config.max_jobs))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(service), host="127.0.0.1", port=port, log_level="warning",
                                           lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started, timeout=20, what="the server to start")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        service.jobs.close()


NEAR_MISS = ("near-1", "near-2", "near-3")


def add_near_miss(run_dir: Path, artifact: str) -> str:
    """Record in a finished run's store a change turned down with a win on each of three focus tasks no commit won
    (`NEAR_MISS`): the run's frontier then holds them. Returns the change's id."""
    diff = Diff(artifact, 0, (Op.add("rule", "- near: use method 9"),), author="a test's near miss")
    evidence = Evidence((*(Row(t, 0.0, 1.0) for t in NEAR_MISS), Row("near-4", 0.0, 0.0)),
                        focus=(*NEAR_MISS, "near-4"))
    decision = Decision(diff.id, artifact, Outcome.REJECTED, "accept", "not significant (a near miss)",
                        {"harm_p": 1.0})
    with SQLiteStore(run_dir, git=False) as store:
        store.record(diff, evidence, decision)
    return diff.id
