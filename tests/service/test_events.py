"""The live event stream: every event once, in order, resuming after `Last-Event-ID`, while the run goes."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
from fastapi.testclient import TestClient

from agentgrad.store.events import EventLog
from tests.service.support import auth, iter_sse, live_server, sse_events, world

Finished = tuple[TestClient, str, Path]


def _seqs(run_dir: Path, kinds: list[str] | None = None) -> list[int]:
    log = EventLog(run_dir, readonly=True)
    try:
        return [e.seq for e in log.read(kinds)]
    finally:
        log.close()


def test_the_stream_sends_every_event_once_and_resumes_after_the_last_event_id(finished: Finished) -> None:
    api, job_id, run_dir = finished
    every = _seqs(run_dir)
    with api.stream("GET", f"/api/runs/{job_id}/events", headers=auth()) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        whole = sse_events(response.iter_lines())
    assert [int(m["id"]) for m in whole] == every
    assert all(m["data"]["seq"] == int(m["id"]) and m["event"] == m["data"]["kind"] for m in whole)
    middle = every[len(every) // 2]
    with api.stream("GET", f"/api/runs/{job_id}/events", headers={**auth(), "Last-Event-ID": str(middle)}) as again:
        rest = sse_events(again.iter_lines())
    assert [int(m["id"]) for m in rest] == [s for s in every if s > middle]


def test_the_stream_filters_by_kind_and_starts_after_a_given_event(finished: Finished) -> None:
    api, job_id, run_dir = finished
    decisions = _seqs(run_dir, ["decision"])
    params: dict[str, list[str] | int] = {"kind": ["decision"], "after": decisions[1]}
    with api.stream("GET", f"/api/runs/{job_id}/events", params=params, headers=auth()) as response:
        got = sse_events(response.iter_lines())
    assert [int(m["id"]) for m in got] == decisions[2:] and {m["event"] for m in got} == {"decision"}
    bad = api.get(f"/api/runs/{job_id}/events", headers={**auth(), "Last-Event-ID": "x"})
    assert bad.status_code == 422


def test_decisions_stream_live_while_the_run_goes(tmp_path: Path) -> None:
    with live_server(tmp_path) as url, httpx.Client(base_url=url, headers=auth(), timeout=60) as http:
        job = http.post("/api/runs", json={"config": world(median=0.03)}).json()
        run_dir = tmp_path / "runs" / job["id"]
        received: list[tuple[float, int]] = []
        params = {"kind": ["decision", "finished"]}
        with http.stream("GET", f"/api/runs/{job['id']}/events", params=params) as response:
            for message in iter_sse(response.iter_lines()):
                received.append((time.time(), int(message["id"])))
    log = EventLog(run_dir, readonly=True)
    try:
        finished_at = log.read(["finished"])[-1].at
    finally:
        log.close()
    assert [s for _, s in received] == _seqs(run_dir, ["decision", "finished"])
    first_decision_seen = received[0][0]
    assert first_decision_seen < finished_at  # seen while the run was still going, not replayed afterwards
