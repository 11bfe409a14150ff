"""Run the service with uvicorn (`agentgrad serve`)."""

from __future__ import annotations

import logging
from pathlib import Path

from agentgrad.service.app import build_service, create_app
from agentgrad.service.auth import TokenBook, load_tokens
from agentgrad.service.settings import Settings


def serve(settings: Settings, *, port: int, tokens_file: Path | None, log_level: str = "info") -> None:
    """Serve until interrupted: the jobs in `settings.home` are taken up first."""
    import uvicorn

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    book = TokenBook(load_tokens(tokens_file), default_max_jobs=settings.max_jobs)
    app = create_app(build_service(settings, book))
    uvicorn.run(app, host=settings.host, port=port, log_level=log_level, access_log=False)
