"""`serve`: the service and its dashboard (``pip install 'agentgrad[service]'``); `--new-token` makes a token."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agentgrad.cli.output import USAGE, fail, guarded, say


def _new_token(tokens: Path | None, name: str, scopes: list[str], max_jobs: int | None) -> None:
    from agentgrad.service.auth import add_to_file, new_entry

    if tokens is None:
        fail("--new-token needs --tokens FILE (the file keeps only the token's hash)", USAGE)
    token, entry = new_entry(name, scopes, max_jobs)
    add_to_file(tokens, entry)
    say(f"token {name!r} ({', '.join(scopes)}) added to {tokens}; it is shown only now:\n{token}")


@guarded
def serve(home: Annotated[Path, typer.Option("--home", help="The service's folder: its jobs table and runs.")]
          = Path("agentgrad-service"),
          host: Annotated[str, typer.Option(help="The address to listen on.")] = "127.0.0.1",
          port: Annotated[int, typer.Option(help="The port to listen on.")] = 8765,
          tokens: Annotated[Path | None, typer.Option("--tokens", help="A JSON tokens file (hashes only); "
                                                      "AGENTGRAD_SERVICE_TOKENS adds more.")] = None,
          local_only: Annotated[bool, typer.Option("--local-only", help="Answer without a token (127.0.0.1 "
                                                   "only).")] = False,
          config_dir: Annotated[Path | None, typer.Option("--config-dir", help="Where submitted configurations' "
                                                          "relative paths and hooks are found (default: --home).")]
          = None,
          max_jobs: Annotated[int, typer.Option(help="Active jobs per token (unless its entry says).")] = 4,
          new_token: Annotated[str | None, typer.Option("--new-token", help="Add a token with this name to "
                                                        "--tokens, print it, and exit.")] = None,
          scope: Annotated[list[str] | None, typer.Option("--scope", help="The new token's scopes (read, write).")]
          = None,
          log_level: Annotated[str, typer.Option(help="uvicorn's log level.")] = "info") -> None:
    """Serve the runs in HOME over HTTP: a JSON API, live events and the dashboard at http://HOST:PORT/."""
    if new_token is not None:
        _new_token(tokens, new_token, scope or ["read", "write"], None)
        return
    try:
        from agentgrad.service.server import serve as run_server
        from agentgrad.service.settings import Settings
    except ImportError as exc:
        fail(f"the service needs its extra: pip install 'agentgrad[service]' ({exc})")
    settings = Settings(home=home.resolve(), host=host, local_only=local_only, config_dir=config_dir,
                        max_jobs=max_jobs)
    say(f"agentgrad service on http://{host}:{port}/ (home {settings.home})")
    run_server(settings, port=port, tokens_file=tokens, log_level=log_level)
