"""The dashboard in a real browser: log in, start a run, watch its decisions arrive, open a diff and its "why",
cancel and resume, compare two runs; every page renders (checked screenshots) with no console error."""

from __future__ import annotations

import re
from functools import partial

import httpx
import pytest

from tests.service.support import ARTIFACT, NEAR_MISS, WRITE_TOKEN, add_near_miss, auth, wait_for, world
from tests.ui.conftest import Session

pytestmark = pytest.mark.slow
RUN_ID = re.compile(r"/runs/(r[0-9a-f]{12})$")


def _log_in(session: Session) -> None:
    page = session.page
    page.goto(f"{session.url}/")
    assert page.url.endswith("/login")
    session.shot("login")
    page.fill("#token", WRITE_TOKEN)
    page.click("#login")
    page.wait_for_url(f"{session.url}/")


def _decisions(session: Session) -> int:
    return session.page.locator("#decisions li").count()


def _state(session: Session) -> str:
    return str(session.page.text_content("#state")).strip()


def test_a_run_started_from_the_ui_streams_decisions_cancels_resumes_and_explains_a_diff(session: Session) -> None:
    page = session.page
    _log_in(session)
    page.fill("#run-name", "from-the-ui")
    page.fill("#run-config", world(median=0.05))
    page.click("#start")
    page.wait_for_url(RUN_ID)
    match = RUN_ID.search(page.url)
    assert match is not None
    job_id = match.group(1)
    wait_for(lambda: _decisions(session) >= 1, timeout=60, what="a first decision on the page")
    seen, state = _decisions(session), _state(session)
    assert state == "running"
    wait_for(lambda: _decisions(session) > seen, timeout=60, what="more decisions, live")
    session.shot("run-live")

    page.click("#cancel")
    wait_for(lambda: _state(session) == "cancelled", timeout=60, what="the run to be cancelled")
    assert page.is_enabled("#resume") and not page.is_enabled("#cancel")
    session.shot("run-cancelled")
    page.click("#resume")
    wait_for(lambda: _state(session) == "finished", timeout=90, what="the resumed run to finish")
    assert page.text_content("#restarts") == "0"
    wait_for(lambda: page.locator("#rewards circle").count() >= 2, timeout=10, what="the reward curve")
    assert page.locator("#stages tr[data-stage]").count() == 3
    assert page.locator("#budgets .budget").count() >= 3

    accepted = page.locator("#decisions li", has=page.locator(".outcome.accepted")).first
    diff_id = str(accepted.get_attribute("data-diff"))
    accepted.click()
    page.wait_for_selector("#why-diff")
    assert diff_id in str(page.text_content("#why-diff"))
    assert "evidence:" in str(page.text_content("#why-evidence"))
    assert page.locator("#why pre.diff span.add").count() >= 1
    assert page.locator("#why-decisions li").count() >= 1
    session.shot("run-why")

    near = add_near_miss(session.home / "runs" / job_id, ARTIFACT)  # the run has finished: no writer holds it
    page.reload()
    with httpx.Client(base_url=session.url, headers=auth()) as api:
        frontier = api.get(f"/api/runs/{job_id}/frontier").json()["items"]
    assert {e["task_id"] for e in frontier if e["diff_ids"] == [near]} == set(NEAR_MISS)
    wait_for(lambda: page.text_content("#frontier-count") == str(len(frontier)), timeout=10, what="the frontier")
    assert page.locator("#frontier tbody tr").count() == len(frontier)
    page.locator("#frontier a.diff-id", has_text=near).first.click()
    page.wait_for_function("id => document.getElementById('why-diff')?.textContent.includes(id)", arg=near)
    session.shot("run-frontier")

    page.click("#artifacts a")
    page.wait_for_selector("#lineage")
    assert page.locator("#lineage > li").count() >= 2
    assert page.locator("#lineage pre.diff span.add").count() >= 1
    page.locator("#lineage .why-link").first.click()
    page.wait_for_selector("#why-diff")
    session.shot("artifact-lineage")
    with httpx.Client(base_url=session.url, headers=auth()) as api:
        assert api.get(f"/api/runs/{job_id}").json()["status"]["resumes"] == 1
    assert session.errors == []


def test_two_runs_are_compared_side_by_side(session: Session) -> None:
    with httpx.Client(base_url=session.url, headers=auth(), timeout=30) as api:
        ids = [api.post("/api/runs", json={"config": world(rollouts=r), "name": f"budget-{r}"}).json()["id"]
               for r in (24, 48)]
        def finished(job_id: str) -> bool:
            return bool(api.get(f"/api/runs/{job_id}").json()["job"]["state"] == "finished")

        for job_id in ids:
            wait_for(partial(finished, job_id), timeout=60, what=f"run {job_id} to finish")
    page = session.page
    _log_in(session)
    assert page.locator("#runs tbody tr").count() == 2
    session.shot("runs-list")
    for job_id in ids:
        page.check(f"input.pick[value={job_id}]")
    page.click("#compare")
    page.wait_for_url(re.compile(r"/compare\?"))
    sides = page.locator("#comparison .side")
    assert sides.count() == 2
    assert {sides.nth(i).get_attribute("data-job") for i in range(2)} == set(ids)
    for i in range(2):
        assert sides.nth(i).locator(".state").text_content() == "finished"
        assert sides.nth(i).locator("svg.reward-chart circle").count() >= 2
    assert "budget-24" in str(page.text_content("#comparison")) and "budget-48" in str(page.text_content("#comparison"))
    session.shot("compare")
    assert session.errors == []
