"""The dashboard's pages: the runs list (with the start-a-run form), a live run view, an artifact's lineage with
its rendered diffs, two runs side by side, and the login form that keeps the token in an HTTP-only cookie.

Pages read the same functions the API does (`service.reading`); the live parts (decisions as they happen,
budgets, in-flight work, throughput) are fetched by ``static/app.js`` from the API with the cookie.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qs, urlencode

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, FileSystemLoader, select_autoescape

from agentgrad.cli.rundir import RunDir
from agentgrad.cli.status import run_status
from agentgrad.service import reading
from agentgrad.service.access import COOKIE, ServiceDep
from agentgrad.service.auth import Principal
from agentgrad.service.context import Service
from agentgrad.service.models import JOB_PATTERN, ArtifactQuery, JobId, Offset
from agentgrad.service.routes.runs import job_out

_ROOT = Path(str(resources.files("agentgrad.ui")))
_ENV = Environment(loader=FileSystemLoader(str(_ROOT / "templates")), autoescape=select_autoescape(["html"]))
router = APIRouter(include_in_schema=False)
JobQuery = Annotated[str, Query(pattern=JOB_PATTERN, description="A run id.")]
RUNS_PAGE, DIFFS_PAGE = 200, 500  # a page of the runs list, and of an artifact's diffs
DEFAULT_CONFIG = """[task]
world = { seed = 0, n_categories = 4, tasks_per_category = 40, median = 0.01, sigma = 0.5 }

[budget]
rollouts = 48
proposals = 24
gate_evals = 400

[run]
workers = 4
seed = 1
promote_every = 0
"""


def _render(name: str, **context: Any) -> HTMLResponse:
    return HTMLResponse(_ENV.get_template(name).render(**context))


def _visitor(request: Request, service: Service) -> Principal | None:
    """The dashboard's user: the local user, or the holder of the token in the cookie (None: go log in)."""
    if service.settings.local_only:
        return Principal("local", frozenset({"read", "write"}), service.settings.max_jobs)
    token = request.cookies.get(COOKIE)
    return service.tokens.check(token) if token else None


def _login() -> RedirectResponse:
    return RedirectResponse("/login", status_code=303)


@router.get("/login", response_class=HTMLResponse)
def login_form(service: ServiceDep, failed: int = 0) -> Response:
    return _render("login.html", failed=bool(failed), local=service.settings.local_only)


@router.post("/login")
async def login(request: Request, service: ServiceDep) -> Response:
    fields = parse_qs((await request.body()).decode("utf-8", "replace"))
    token = (fields.get("token") or [""])[0].strip()
    if not token or service.tokens.check(token) is None:
        return RedirectResponse("/login?failed=1", status_code=303)
    response = RedirectResponse("/", status_code=303)
    response.set_cookie(COOKIE, token, httponly=True, samesite="strict", secure=request.url.scheme == "https")
    return response


@router.get("/logout")
def logout() -> Response:
    response = _login()
    response.delete_cookie(COOKIE)
    return response


@router.get("/", response_class=HTMLResponse)
def runs_page(request: Request, service: ServiceDep, offset: Offset = 0) -> Response:
    who = _visitor(request, service)
    if who is None:
        return _login()
    jobs, total = service.jobs.page(RUNS_PAGE, offset)
    return _render("runs.html", jobs=[job_out(j) for j in jobs], total=total, who=who, config=DEFAULT_CONFIG,
                   pages=_pages("/?", offset, RUNS_PAGE, total, len(jobs)))


@router.get("/runs/{job_id}", response_class=HTMLResponse)
def run_page(request: Request, service: ServiceDep, job_id: JobId) -> Response:
    who = _visitor(request, service)
    if who is None:
        return _login()
    job = service.job(job_id)
    target = RunDir(job.run_dir)
    arts = reading.artifacts(target) if target.exists() else []
    return _render("run.html", job=job_out(job), artifacts=arts, who=who)


@router.get("/runs/{job_id}/artifact", response_class=HTMLResponse)
def artifact_page(request: Request, service: ServiceDep, job_id: JobId, artifact: ArtifactQuery,
                  offset: Offset = 0) -> Response:
    who = _visitor(request, service)
    if who is None:
        return _login()
    target = service.run_dir(job_id)
    rows = reading.lineage(target, artifact)
    diffs, total = reading.diffs(target, artifact_id=artifact, limit=DIFFS_PAGE, offset=offset)
    pages = _pages(f"/runs/{job_id}/artifact?{urlencode({'artifact': artifact})}&", offset, DIFFS_PAGE, total,
                   len(diffs))
    return _render("artifact.html", job=job_out(service.job(job_id)), artifact=artifact, versions=rows,
                   diffs=diffs, who=who, pages=pages)


def _pages(base: str, offset: int, size: int, total: int, shown: int) -> dict[str, Any]:
    """Where a paged list is and the links to the pages before and after it (`base` ends in ``?`` or ``&``)."""
    return {"first": offset + 1 if shown else 0, "last": offset + shown, "total": total,
            "newer": f"{base}offset={max(0, offset - size)}" if offset > 0 else None,
            "older": f"{base}offset={offset + size}" if offset + shown < total else None}


def _head_text(target: RunDir, artifact_id: str) -> str:
    with target.store() as store:
        return store.head(artifact_id).text


def _side(service: Service, job_id: str) -> dict[str, Any]:
    target = service.run_dir(job_id)
    texts = {a["id"]: _head_text(target, a["id"]) for a in reading.artifacts(target)}
    return {"job": job_out(service.job(job_id)), "status": run_status(target, service.stats.read), "texts": texts,
            "rewards": reading.rewards(target, service.stats.read)}


@router.get("/compare", response_class=HTMLResponse)
def compare_page(request: Request, service: ServiceDep, a: JobQuery, b: JobQuery) -> Response:
    who = _visitor(request, service)
    if who is None:
        return _login()
    return _render("compare.html", sides=[_side(service, a), _side(service, b)], who=who)


def mount(app: FastAPI) -> None:
    """Add the dashboard's pages and static files to `app`."""
    app.mount("/static", StaticFiles(directory=str(_ROOT / "static")), name="static")
    app.include_router(router)
