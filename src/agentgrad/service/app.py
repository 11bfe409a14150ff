"""The app factory: the API, its errors as JSON, and the dashboard, over the collaborators it is given."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from agentgrad.service import errors
from agentgrad.service.auth import TokenBook
from agentgrad.service.context import Service
from agentgrad.service.jobs import JobTable
from agentgrad.service.routes import events, library, runs
from agentgrad.service.settings import Settings
from agentgrad.service.supervisor import Supervisor
from agentgrad.service.workers import Workers


def build_service(settings: Settings, tokens: TokenBook) -> Service:
    """The collaborators for `settings`: the jobs table in its home, worker processes and their supervisor."""
    if not settings.local_only and len(tokens) == 0:
        from agentgrad.errors import ConfigError

        raise ConfigError("no tokens: give a tokens file (or AGENTGRAD_SERVICE_TOKENS), or start with --local-only "
                          "on 127.0.0.1")
    jobs = JobTable(settings.jobs_db, settings.runs_dir)
    supervisor = Supervisor(settings, jobs, Workers(settings.python))
    return Service(settings, jobs, supervisor, tokens)


def create_app(service: Service, *, supervise: bool = True) -> FastAPI:
    """The service's ASGI app. With `supervise`, the supervisor takes up the jobs when the app starts and stops
    checking when it stops (workers go on running)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if supervise:
            service.supervisor.start()
        try:
            yield
        finally:
            if supervise:
                service.supervisor.stop()

    app = FastAPI(title="agentgrad service", version="1", lifespan=lifespan,
                  description="Runs as durable jobs, their stores and live events, and the dashboard.")
    app.state.service = service
    errors.install(app)
    for module in (runs, library, events):
        app.include_router(module.router)
    from agentgrad.ui.pages import mount

    mount(app)
    return app
