"""The read endpoints answer what the run's store and log hold, paged and validated, with JSON errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from agentgrad.core.decision import Outcome
from agentgrad.runtime.frontier import frontier
from agentgrad.store.events import EventLog
from agentgrad.store.sqlite import SQLiteStore
from tests.service.support import ARTIFACT, NEAR_MISS, add_near_miss, auth

Finished = tuple[TestClient, str, Path]


def test_runs_list_and_run_status_say_the_run_finished(finished: Finished) -> None:
    api, job_id, _ = finished
    listed = api.get("/api/runs", headers=auth()).json()
    assert listed["total"] == 1 and listed["items"][0]["id"] == job_id
    run = api.get(f"/api/runs/{job_id}", headers=auth()).json()
    assert run["job"]["state"] == "finished" and run["status"]["state"] == "finished"
    assert run["status"]["commits"] >= 1


def test_artifacts_versions_and_export_match_the_store(finished: Finished) -> None:
    api, job_id, run_dir = finished
    with SQLiteStore(run_dir, git=False) as store:
        history = store.history(ARTIFACT)
        stable = store.head(ARTIFACT, "stable")
    artifacts = api.get(f"/api/runs/{job_id}/artifacts", headers=auth()).json()["items"]
    assert artifacts == [{"id": ARTIFACT, "kind": "skill", "layer": "L2", "dev": history[-1].number, "stable": 0}]
    page = api.get(f"/api/runs/{job_id}/versions", params={"artifact": ARTIFACT, "limit": 2, "offset": 1,
                                                           "text": True}, headers=auth()).json()
    assert page["total"] == len(history)
    assert [(v["number"], v["diff_id"], v["text"]) for v in page["items"]] == [
        (v.number, v.diff_id, v.text) for v in history[1:3]]
    exported = api.get(f"/api/runs/{job_id}/export", headers=auth()).json()
    assert exported == {"branch": "stable", "files": {ARTIFACT: {"version": 0, "text": stable.text}}}
    dev = api.get(f"/api/runs/{job_id}/export", params={"branch": "dev"}, headers=auth()).json()
    assert dev["files"][ARTIFACT] == {"version": history[-1].number, "text": history[-1].text}


def test_decisions_come_with_their_evidence_and_filter_by_outcome(finished: Finished) -> None:
    api, job_id, run_dir = finished
    with SQLiteStore(run_dir, git=False) as store:
        every = store.decisions()
        accepted = store.decisions(outcome=Outcome.ACCEPTED)
        first_why = store.why(every[0].diff_id)
    page = api.get(f"/api/runs/{job_id}/decisions", params={"limit": 3}, headers=auth()).json()
    assert page["total"] == len(every) and len(page["items"]) == 3
    assert page["items"][0]["diff_id"] == every[0].diff_id
    assert page["items"][0]["evidence"] == first_why["evidence"]
    only = api.get(f"/api/runs/{job_id}/decisions", params={"outcome": "accepted", "limit": 500}, headers=auth())
    assert [d["diff_id"] for d in only.json()["items"]] == [d.diff_id for d in accepted]


def test_a_committed_diff_renders_as_the_unified_diff_of_its_version_and_why_is_the_stores(finished: Finished
                                                                                           ) -> None:
    api, job_id, run_dir = finished
    with SQLiteStore(run_dir, git=False) as store:
        version = store.history(ARTIFACT)[1]
        assert version.diff_id is not None
        why = store.why(version.diff_id)
    view = api.get(f"/api/runs/{job_id}/diffs/{version.diff_id}", headers=auth()).json()
    assert view["version"] == 1 and view["outcome"] == "accepted"
    assert view["unified"].startswith("--- v0\n+++ v1\n")
    added = [line[1:] for line in view["unified"].splitlines() if line.startswith("+") and not line.startswith("++")]
    assert added and all(line in version.text for line in added)
    assert api.get(f"/api/runs/{job_id}/why/{version.diff_id}", headers=auth()).json() == why
    listed = api.get(f"/api/runs/{job_id}/diffs", params={"artifact": ARTIFACT, "limit": 500}, headers=auth()).json()
    assert version.diff_id in [d["id"] for d in listed["items"]] and listed["total"] == len(listed["items"])


def test_the_frontier_is_the_one_the_store_gives_and_names_changes_not_committed(finished: Finished) -> None:
    api, job_id, run_dir = finished
    near = add_near_miss(run_dir, ARTIFACT)
    with SQLiteStore(run_dir, git=False) as store:
        expected = frontier(store.decisions(), store.evidence)
        last = {d.diff_id: d.outcome for d in store.decisions()}
    served = api.get(f"/api/runs/{job_id}/frontier", params={"artifact": ARTIFACT}, headers=auth()).json()["items"]
    assert served == [{"task_id": e.task_id, "diff_ids": list(e.diff_ids), "wins": e.wins} for e in expected]
    assert {e["task_id"] for e in served if e["diff_ids"] == [near]} == set(NEAR_MISS)
    assert all(last[d] is not Outcome.ACCEPTED for e in served for d in e["diff_ids"])


def test_usage_and_rewards_report_budgets_stages_and_the_reward_curve(finished: Finished) -> None:
    api, job_id, run_dir = finished
    usage = api.get(f"/api/runs/{job_id}/usage", headers=auth()).json()
    assert usage["budget"]["rollouts"]["limit"] == 48 and 0 < usage["budget"]["rollouts"]["used"] <= 48
    assert set(usage["stages"]) == {"rollouts", "proposals", "gate_evals"}
    assert all(s["in_flight"] == 0 for s in usage["stages"].values())
    log = EventLog(run_dir, readonly=True)
    try:
        assert usage["seq"] == log.last_seq()
        commits = log.count("commit")
    finally:
        log.close()
    assert usage["commits"] == commits
    rewards = api.get(f"/api/runs/{job_id}/rewards", headers=auth()).json()
    assert rewards["validation"][0]["version"] == 0 and len(rewards["validation"]) >= 2
    assert [p["version"] for p in rewards["held_out"]] == [0, usage["commits"]]


def test_promote_moves_stable_to_dev(finished: Finished) -> None:
    api, job_id, run_dir = finished
    promoted = api.post(f"/api/runs/{job_id}/promote", json={"artifacts": [ARTIFACT]}, headers=auth()).json()
    with SQLiteStore(run_dir, git=False) as store:
        dev = store.head(ARTIFACT).number
        assert store.head(ARTIFACT, "stable").number == dev
    assert promoted == {"promoted": {ARTIFACT: dev}, "before": {ARTIFACT: 0}}
    unknown = api.post(f"/api/runs/{job_id}/promote", json={"artifacts": ["nope"]}, headers=auth())
    assert unknown.status_code == 404 and unknown.json()["error"]["type"] == "not_found"


@pytest.mark.parametrize(("path", "params", "status"), [
    ("/api/runs/r000000000000", {}, 404),
    ("/api/runs/not-an-id", {}, 422),
    ("/api/runs", {"limit": 501}, 422),
    ("/api/runs", {"offset": -1}, 422),
    ("/api/runs/{job}/versions", {"artifact": "../etc"}, 422),
    ("/api/runs/{job}/versions", {"artifact": "unknown"}, 404),
    ("/api/runs/{job}/versions", {}, 422),
    ("/api/runs/{job}/diffs/nope", {}, 404),
    ("/api/runs/{job}/why/nope", {}, 404),
    ("/api/runs/{job}/frontier", {"artifact": "unknown"}, 404),
    ("/api/runs/{job}/decisions", {"outcome": "maybe"}, 422),
    ("/api/nothing-here", {}, 404),
])
def test_bad_requests_are_json_errors_saying_what_is_wrong(finished: Finished, path: str, params: dict[str, int | str],
                                                          status: int) -> None:
    api, job_id, _ = finished
    response = api.get(path.format(job=job_id), params=params, headers=auth())
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["type"] and error["message"]
    assert "Traceback" not in response.text
