"""Jobs: start a run from a configuration, list runs, one run's status, cancel, resume, promote and export."""

from __future__ import annotations

from fastapi import APIRouter, Body

from agentgrad.cli.rundir import RunDir
from agentgrad.cli.status import run_status
from agentgrad.service.access import Reader, ServiceDep, Writer
from agentgrad.service.errors import ApiError
from agentgrad.service.jobs import Job
from agentgrad.service.models import (
    Branch,
    Export,
    ExportedFile,
    JobId,
    JobOut,
    JobPage,
    Limit,
    Offset,
    Promoted,
    PromoteRequest,
    RunOut,
    StartRun,
)
from agentgrad.service.reading import check_artifact
from agentgrad.service.routes.common import ERRORS

router = APIRouter(prefix="/api/runs", tags=["runs"], responses=ERRORS)


def job_out(job: Job) -> JobOut:
    return JobOut(id=job.id, name=job.name, owner=job.owner, state=job.state.value, pid=job.pid,
                  restarts=job.restarts, error=job.error, created=job.created, updated=job.updated)


@router.get("", response_model=JobPage, summary="List runs, newest first")
def list_runs(service: ServiceDep, who: Reader, limit: Limit = 50, offset: Offset = 0) -> JobPage:
    jobs, total = service.jobs.page(limit, offset)
    return JobPage(items=[job_out(j) for j in jobs], total=total, limit=limit, offset=offset)


@router.post("", status_code=201, response_model=JobOut, summary="Start a run from a configuration")
def start_run(service: ServiceDep, who: Writer, request: StartRun) -> JobOut:
    job = service.supervisor.submit(who.name, who.max_jobs, request.name, request.config, request.format)
    return job_out(job)


@router.get("/{job_id}", response_model=RunOut, summary="A run: its job and its status")
def get_run(service: ServiceDep, who: Reader, job_id: JobId) -> RunOut:
    job = service.job(job_id)
    target = RunDir(job.run_dir)
    return RunOut(job=job_out(job), status=run_status(target, service.stats.read) if target.exists() else None)


@router.post("/{job_id}/cancel", status_code=202, response_model=JobOut, summary="Stop a running run cleanly")
def cancel_run(service: ServiceDep, who: Writer, job_id: JobId) -> JobOut:
    return job_out(service.supervisor.cancel(service.job(job_id)))


@router.post("/{job_id}/resume", status_code=202, response_model=JobOut, summary="Continue a cancelled or failed run")
def resume_run(service: ServiceDep, who: Writer, job_id: JobId) -> JobOut:
    return job_out(service.supervisor.resume(service.job(job_id), who.max_jobs))


@router.post("/{job_id}/promote", response_model=Promoted, summary="Move stable heads up to the dev heads")
def promote_run(service: ServiceDep, who: Writer, job_id: JobId,
                request: PromoteRequest | None = Body(None)) -> Promoted:  # noqa: B008 - FastAPI's way
    target = service.run_dir(job_id)
    wanted = request.artifacts if request is not None else None
    with target.store(git=True) as store:
        for artifact_id in wanted or ():
            check_artifact(store, artifact_id)
        before = {a: v.number for a, v in store.heads("stable").items()}
        if not before:
            raise ApiError(409, "conflict", "the run has no artifact yet")
        promoted = store.promote(wanted or None)
    return Promoted(promoted=promoted, before={a: before[a] for a in promoted})


@router.get("/{job_id}/export", response_model=Export, summary="The library's files at a branch's heads")
def export_run(service: ServiceDep, who: Reader, job_id: JobId, branch: Branch = "stable") -> Export:
    target = service.run_dir(job_id)
    with target.store() as store:
        heads = store.heads(branch)
    return Export(branch=branch, files={a: ExportedFile(version=v.number, text=v.text) for a, v in heads.items()})
