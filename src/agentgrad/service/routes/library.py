"""What one run's store and log hold: artifacts, versions, diffs (rendered), decisions with their evidence, the
per-example frontier, why a diff went its way, budget use and rewards."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from agentgrad.service import reading
from agentgrad.service.access import Reader, ServiceDep
from agentgrad.service.models import (
    ArtifactList,
    ArtifactOut,
    ArtifactQuery,
    DecisionPage,
    DiffId,
    DiffPage,
    DiffSummary,
    DiffView,
    FrontierList,
    FrontierOut,
    JobId,
    Limit,
    Offset,
    OptionalArtifact,
    OutcomeQuery,
    Rewards,
    Usage,
    VersionOut,
    VersionPage,
    Why,
)
from agentgrad.service.routes.common import ERRORS

router = APIRouter(prefix="/api/runs/{job_id}", tags=["library"], responses=ERRORS)


@router.get("/artifacts", response_model=ArtifactList, summary="The run's artifacts and their heads")
def artifacts(service: ServiceDep, who: Reader, job_id: JobId) -> ArtifactList:
    rows = reading.artifacts(service.run_dir(job_id))
    return ArtifactList(items=[ArtifactOut(**r) for r in rows])


@router.get("/versions", response_model=VersionPage, summary="An artifact's versions, oldest first")
def versions(service: ServiceDep, who: Reader, job_id: JobId, artifact: ArtifactQuery, limit: Limit = 50,
             offset: Offset = 0, text: Annotated[bool, Query(description="Include each version's text.")] = False
             ) -> VersionPage:
    rows, total = reading.versions(service.run_dir(job_id), artifact, limit, offset, text=text)
    return VersionPage(items=[VersionOut(**r) for r in rows], total=total, limit=limit, offset=offset)


@router.get("/diffs", response_model=DiffPage, summary="The run's diffs with their latest verdicts")
def diffs(service: ServiceDep, who: Reader, job_id: JobId, artifact: OptionalArtifact = None, limit: Limit = 50,
          offset: Offset = 0) -> DiffPage:
    rows, total = reading.diffs(service.run_dir(job_id), artifact_id=artifact, limit=limit, offset=offset)
    return DiffPage(items=[DiffSummary(**r) for r in rows], total=total, limit=limit, offset=offset)


@router.get("/diffs/{diff_id}", response_model=DiffView, summary="One diff, rendered against its base version")
def diff(service: ServiceDep, who: Reader, job_id: JobId, diff_id: DiffId) -> DiffView:
    return DiffView(**reading.diff_view(service.run_dir(job_id), diff_id))


@router.get("/decisions", response_model=DecisionPage, summary="Decisions with their evidence, oldest first")
def decisions(service: ServiceDep, who: Reader, job_id: JobId, outcome: OutcomeQuery = None,
              artifact: OptionalArtifact = None, limit: Limit = 50, offset: Offset = 0) -> DecisionPage:
    rows, total = reading.decisions(service.run_dir(job_id), outcome=outcome, artifact_id=artifact, limit=limit,
                                    offset=offset)
    return DecisionPage(items=rows, total=total, limit=limit, offset=offset)


@router.get("/frontier", response_model=FrontierList,
            summary="The examples only changes not committed won, and those changes")
def frontier(service: ServiceDep, who: Reader, job_id: JobId, artifact: OptionalArtifact = None) -> FrontierList:
    rows = reading.frontier(service.run_dir(job_id), artifact_id=artifact)
    return FrontierList(items=[FrontierOut(**r) for r in rows])


@router.get("/why/{diff_id}", response_model=Why, summary="Why a diff went its way")
def why(service: ServiceDep, who: Reader, job_id: JobId, diff_id: DiffId) -> Why:
    return Why(**reading.why(service.run_dir(job_id), diff_id))


@router.get("/usage", response_model=Usage, summary="Budgets, in-flight work and throughput against its limit")
def usage(service: ServiceDep, who: Reader, job_id: JobId) -> Usage:
    return Usage(**reading.usage(service.run_dir(job_id), service.stats.read))


@router.get("/rewards", response_model=Rewards, summary="Validation and held-out reward over time")
def rewards(service: ServiceDep, who: Reader, job_id: JobId) -> Rewards:
    return Rewards(**reading.rewards(service.run_dir(job_id), service.stats.read))
