"""The dashboard's lists come in pages: past 200 runs (or 500 diffs of an artifact) the page says where it is and
links the pages before and after it; nothing is left out."""

from __future__ import annotations

import re
from pathlib import Path

from fastapi.testclient import TestClient

from agentgrad.service.app import build_service, create_app
from agentgrad.service.auth import TokenBook
from agentgrad.service.jobs import JobState
from agentgrad.ui.pages import RUNS_PAGE
from tests.service.support import settings


def test_the_runs_list_pages_through_every_run(tmp_path: Path) -> None:
    config = settings(tmp_path, local_only=True)
    service = build_service(config, TokenBook([], default_max_jobs=config.max_jobs))
    count = RUNS_PAGE + 37
    for i in range(count):
        job_id = f"r{i:012d}"
        service.jobs.create(job_id, f"run {i}", "local", limit=count + 1)
        service.jobs.update(job_id, state=JobState.FINISHED)
    seen: set[str] = set()
    with TestClient(create_app(service, supervise=False)) as web:
        first = web.get("/").text
        assert f"1–{RUNS_PAGE} of {count}" in first and "earlier page" not in first
        older = re.search(r'class="runs-older" href="([^"]+)"', first)
        assert older is not None
        second = web.get(older.group(1).replace("&amp;", "&")).text
        assert f"{RUNS_PAGE + 1}–{count} of {count}" in second and "next page" not in second
        assert 'class="runs-newer" href="/?offset=0"' in second
        for page in (first, second):
            seen |= set(re.findall(r'<tr data-job="([^"]+)"', page))
    assert len(seen) == count  # every run is on one of the pages
