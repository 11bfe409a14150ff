"""The collaborators one service app works with, handed to `create_app` and reached by the routes through the
request (`service_of`): no module-level state."""

from __future__ import annotations

from dataclasses import dataclass, field

from fastapi import Request

from agentgrad.cli.rundir import RunDir
from agentgrad.service.auth import TokenBook
from agentgrad.service.errors import not_found
from agentgrad.service.jobs import Job, JobTable
from agentgrad.service.settings import Settings
from agentgrad.service.statscache import StatsCache
from agentgrad.service.supervisor import Supervisor


@dataclass(frozen=True)
class Service:
    """Settings, the jobs table, the supervisor, the accepted tokens and each run's counters (`StatsCache`)."""

    settings: Settings
    jobs: JobTable
    supervisor: Supervisor
    tokens: TokenBook
    stats: StatsCache = field(default_factory=StatsCache)

    def job(self, job_id: str) -> Job:
        """The job with this id, else a 404."""
        job = self.jobs.get(job_id)
        if job is None:
            raise not_found(f"no run {job_id!r}")
        return job

    def run_dir(self, job_id: str) -> RunDir:
        """The run directory of a job whose run has begun (a 404 if there is no such job, or no run yet)."""
        target = RunDir(self.job(job_id).run_dir)
        if not target.exists():
            raise not_found(f"run {job_id!r} has no store yet")
        return target


def service_of(request: Request) -> Service:
    """The service of the app serving `request`."""
    service = request.app.state.service
    assert isinstance(service, Service)
    return service
