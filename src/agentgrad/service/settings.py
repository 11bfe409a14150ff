"""What the service is started with: where its jobs and runs live, who may call it, and how it supervises workers."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from agentgrad.errors import ConfigError

LOCAL_HOST = "127.0.0.1"
JOBS_DB = "service.db"


@dataclass(frozen=True)
class Settings:
    """The service's settings (`agentgrad serve` builds them from its options).

    Args:
        home: the service's folder: the jobs table (``service.db``) and one run directory per job (``runs/<id>``).
        host: the address the server listens on (only used to check `local_only`).
        local_only: answer without a token; allowed only on 127.0.0.1.
        config_dir: the folder a submitted configuration's relative paths and ``module:function`` hooks are found
            in (default: `home`).
        max_jobs: how many jobs a token may have active at once, unless its own entry says otherwise.
        supervise_every: seconds between two checks of the workers.
        max_restarts: how many times a job whose worker died is resumed before it is marked failed.
        stream_poll: seconds between two reads of a run's event log by a live stream.
        heartbeat: seconds of silence after which a live stream sends a comment line.
        python: the interpreter worker processes run with.
    """

    home: Path
    host: str = LOCAL_HOST
    local_only: bool = False
    config_dir: Path | None = None
    max_jobs: int = 4
    supervise_every: float = 0.5
    max_restarts: int = 3
    stream_poll: float = 0.1
    heartbeat: float = 15.0
    python: str = field(default=sys.executable)

    def __post_init__(self) -> None:
        if self.local_only and self.host != LOCAL_HOST:
            raise ConfigError(f"--local-only (no token needed) is allowed only on {LOCAL_HOST}, not on {self.host!r}")
        if self.max_jobs < 1 or self.max_restarts < 0:
            raise ConfigError("max_jobs must be at least 1 and max_restarts at least 0")
        if self.supervise_every <= 0 or self.stream_poll <= 0 or self.heartbeat <= 0:
            raise ConfigError("supervise_every, stream_poll and heartbeat must be positive")

    @property
    def runs_dir(self) -> Path:
        """Where the jobs' run directories are."""
        return self.home / "runs"

    @property
    def jobs_db(self) -> Path:
        """The jobs table's database file."""
        return self.home / JOBS_DB

    @property
    def base_dir(self) -> Path:
        """The folder configurations are resolved against."""
        return (self.config_dir or self.home).resolve()
