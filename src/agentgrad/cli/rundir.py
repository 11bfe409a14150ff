"""A run directory as the CLI sees it: the database (store and event log), the stored configuration, the process
that runs it (``run.pid``) and its log (``run.log``).

Read commands open the store without the git mirror (nothing is written); a directory without ``agentgrad.db``
is not a run, and every command says so instead of creating one.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentgrad.cli.config import ConfigSource
from agentgrad.core._checks import is_integer
from agentgrad.errors import AgentgradError, DamagedStoreError

if TYPE_CHECKING:
    from agentgrad.store.events import EventLog
    from agentgrad.store.sqlite import SQLiteStore

DB = "agentgrad.db"
MAX_PID = 2**22  # Linux's largest pid_max; a larger number in run.pid names no process
CONFIG_KEY = "cli_config"
STATE_KEY = "cli_state"


class RunDirError(AgentgradError):
    """A path that is not a usable run directory (no run there, or a database agentgrad cannot read)."""


def process_alive(pid: int) -> bool:
    """True if process `pid` exists and is not a zombie (a zombie has exited; only its parent has not reaped it).
    A number that is no process id (< 1, or past `MAX_PID`) is no live process."""
    if not is_integer(pid, low=1, high=MAX_PID):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    try:
        state = stat.read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in ("Z", "X")


def runs_agentgrad(pid: int) -> bool:
    """True unless the process's command line is readable and does not mention agentgrad (a reused pid)."""
    try:
        return b"agentgrad" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True


@dataclass(frozen=True)
class RunDir:
    """A run directory. `path` need not exist (commands then say there is no run)."""

    path: Path

    @property
    def db(self) -> Path:
        return self.path / DB

    @property
    def pid_file(self) -> Path:
        return self.path / "run.pid"

    @property
    def log_file(self) -> Path:
        return self.path / "run.log"

    def exists(self) -> bool:
        """True if the directory holds a run database."""
        return self.db.is_file()

    def started(self) -> bool:
        """True if a run has begun here (evolve stored its configuration or logged an event)."""
        if not self.exists():
            return False
        with self.events() as log:
            return log.get("config") is not None or log.last_seq() > 0

    def require(self) -> None:
        """Raise `RunDirError` unless the directory holds a run."""
        if not self.path.exists():
            raise RunDirError(f"{self.path} does not exist")
        if not self.exists():
            raise RunDirError(f"{self.path} holds no agentgrad run (no {DB})")

    @contextmanager
    def events(self, *, write: bool = False) -> Iterator[EventLog]:
        """The event log of an existing run, read-only unless `write` (nothing is written to the file by a read:
        a run directory the user cannot write can be read)."""
        from agentgrad.store.events import EventLog

        self.require()
        try:
            log = EventLog(self.path, readonly=not write)
        except (sqlite3.DatabaseError, DamagedStoreError) as exc:
            raise RunDirError(f"{self.db} is not a readable agentgrad database ({exc})") from exc
        try:
            yield log
        except DamagedStoreError as exc:  # found on a read, not on opening
            raise RunDirError(f"{self.db} is not a readable agentgrad database ({exc})") from exc
        finally:
            log.close()

    @contextmanager
    def store(self, *, git: bool = False) -> Iterator[SQLiteStore]:
        """The store of an existing run: read-only, or with `git=True` writable and updating the git mirror (for
        writes such as promote)."""
        from agentgrad.store.sqlite import SQLiteStore

        self.require()
        if git:  # a writer would make a store of an empty database: a read first refuses what holds no run
            with self.events():
                pass
        try:
            store = SQLiteStore(self.path, git=git, readonly=not git)
        except (sqlite3.DatabaseError, DamagedStoreError) as exc:
            raise RunDirError(f"{self.db} is not a readable agentgrad database ({exc})") from exc
        try:
            yield store
        finally:
            store.close()

    def config_source(self) -> ConfigSource | None:
        """The configuration the CLI stored when it started this run (None for runs started from Python)."""
        with self.events() as log:
            data = log.get(CONFIG_KEY)
        return None if data is None else ConfigSource.from_dict(data)

    def save_config(self, source: ConfigSource) -> None:
        """Store the configuration in a new run directory (creating its database)."""
        from agentgrad.store.events import EventLog

        log = EventLog(self.path)
        try:
            log.put(CONFIG_KEY, source.to_dict())
        finally:
            log.close()

    def note(self, state: str, **details: Any) -> None:
        """Remember how the CLI's last session on this run ended ("interrupted", "running", ...)."""
        with self.events(write=True) as log:
            log.put(STATE_KEY, {"state": state, **details})

    def cli_state(self) -> dict[str, Any] | None:
        with self.events() as log:
            value = log.get(STATE_KEY)
        return dict(value) if isinstance(value, dict) else None

    # -- the process ----------------------------------------------------------------------------------------
    def pid(self) -> int | None:
        """The pid in ``run.pid``, if the file is there and holds one: a process id >= 1 (``-1`` or ``0`` would name
        every process or a whole group to `os.kill`, so they are no pid; so is a number too large for one)."""
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if is_integer(pid, low=1, high=MAX_PID) else None

    def running_pid(self) -> int | None:
        """The pid of a live agentgrad process running this directory, if any."""
        pid = self.pid()
        return pid if pid is not None and process_alive(pid) and runs_agentgrad(pid) else None

    def write_pid(self, pid: int) -> None:
        self.pid_file.write_text(f"{pid}\n")

    def clear_pid(self, pid: int) -> None:
        """Remove ``run.pid`` if it still names `pid`."""
        if self.pid() == pid:
            self.pid_file.unlink(missing_ok=True)
