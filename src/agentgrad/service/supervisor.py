"""The supervisor: keeps every active job's worker alive, and is the only place jobs change state.

A check (`check`, every `Settings.supervise_every` seconds on a thread, and once when the service starts) looks at
each active job. A live worker is left alone (after a restart of the service, that is how a job is re-attached).
When the worker is gone, the run directory says how it ended (the note the CLI writes: finished, failed or
interrupted); a worker that died without saying (killed, crashed) is resumed, at most `max_restarts` times, with
`agentgrad resume` semantics: the run picks up from its last checkpoint and loses no commit.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from agentgrad.cli.config import ConfigSource, parse_config
from agentgrad.cli.rundir import RunDir
from agentgrad.service.errors import ApiError
from agentgrad.service.jobs import Job, JobState, JobTable, new_job_id
from agentgrad.service.settings import Settings
from agentgrad.service.workers import Workers

LOG = logging.getLogger("agentgrad.service")
_ENDED = {"finished": JobState.FINISHED, "failed": JobState.FAILED, "interrupted": JobState.CANCELLED}


def log_tail(run_dir: Path, lines: int = 5) -> str:
    """The last lines of a worker's output (to say why it failed)."""
    try:
        text = RunDir(run_dir).log_file.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


class Supervisor:
    """Starts, cancels, resumes and watches the jobs of one service home.

    State: the jobs table, the workers, a lock that makes each job change (and each check) one step, and the
    thread that checks.
    """

    def __init__(self, settings: Settings, jobs: JobTable, workers: Workers) -> None:
        self.settings, self.jobs, self.workers = settings, jobs, workers
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- lifetime -------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Take up the jobs a previous service left (re-attach or resume), then check on a thread."""
        self.check()
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="agentgrad-supervisor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop checking; workers go on running (the next service takes them up)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        self.workers.close()

    def _loop(self) -> None:
        while not self._stop.wait(self.settings.supervise_every):
            try:
                self.check()
            except Exception:
                LOG.exception("supervisor check failed")

    # -- commands -------------------------------------------------------------------------------------------
    def submit(self, owner: str, limit: int, name: str, text: str, fmt: str) -> Job:
        """Validate a configuration, create its job and start its worker (`ApiError` 429 over `limit`)."""
        source = ConfigSource(text, "toml" if fmt == "toml" else "yaml", str(self.settings.base_dir), name)
        parse_config(source, imports=False)  # by form only: no module of the submitter's runs in this process
        with self._lock:
            job = self.jobs.create(new_job_id(), name, owner, limit=limit)
            if job is None:
                raise _too_many(owner, limit)
            job.run_dir.mkdir(parents=True, exist_ok=True)
            RunDir(job.run_dir).save_config(source)
            return self._spawn(job)

    def cancel(self, job: Job) -> Job:
        """Ask a running job's worker to stop cleanly; the job is CANCELLED once it has."""
        with self._lock:
            current = self.jobs.require(job.id)
            if current.state is not JobState.RUNNING:
                raise ApiError(409, "conflict", f"job {job.id} is {current.state.value}: only a running job can be "
                                                "cancelled")
            current = self.jobs.update(job.id, state=JobState.CANCELLING)
            if current.pid is not None:
                self.workers.interrupt(current.pid)
            return current

    def resume(self, job: Job, limit: int) -> Job:
        """Start a worker again for a cancelled or failed job; it continues from its last checkpoint."""
        with self._lock:
            current = self.jobs.require(job.id)
            if current.state is JobState.FINISHED or current.state.active:
                raise ApiError(409, "conflict", f"job {job.id} is {current.state.value}: only a cancelled or "
                                                "failed job can be resumed")
            if not self.jobs.reactivate(job.id, current.owner, limit=limit):
                raise _too_many(current.owner, limit)
            return self._spawn(self.jobs.require(job.id))

    # -- the check ------------------------------------------------------------------------------------------
    def check(self) -> None:
        """One look at every active job (see the module's doc)."""
        with self._lock:
            self.workers.reap()
            for job in self.jobs.active():
                if not self.workers.alive(job.pid):
                    self._ended(job)

    def _ended(self, job: Job) -> None:
        note = RunDir(job.run_dir).cli_state() if RunDir(job.run_dir).exists() else None
        said = _ENDED.get(str((note or {}).get("state")))
        if said is not None:
            error = (note or {}).get("error") if said is JobState.FAILED else None
            self.jobs.update(job.id, state=said, pid=None, error=None if error is None else str(error))
        elif job.state is JobState.CANCELLING:
            self.jobs.update(job.id, state=JobState.CANCELLED, pid=None)
        elif job.restarts >= self.settings.max_restarts:
            tail = log_tail(job.run_dir)
            self.jobs.update(job.id, state=JobState.FAILED, pid=None,
                             error=f"the worker died {job.restarts + 1} times; its last output: {tail}")
        else:
            LOG.warning("job %s: its worker (pid %s) is gone without finishing; resuming it", job.id, job.pid)
            self._spawn(self.jobs.update(job.id, restarts=job.restarts + 1))

    def _spawn(self, job: Job) -> Job:
        try:
            pid = self.workers.spawn(job.run_dir)
        except OSError as exc:
            return self.jobs.update(job.id, state=JobState.FAILED, pid=None, error=f"cannot start a worker: {exc}")
        return self.jobs.update(job.id, pid=pid)


def _too_many(owner: str, limit: int) -> ApiError:
    return ApiError(429, "concurrency_limit", f"token {owner!r} already has {limit} active job(s), its limit; "
                                              "wait for one to end or cancel one", {"Retry-After": "5"})
