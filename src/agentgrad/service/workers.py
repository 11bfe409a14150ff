"""Worker processes: each job's run executes in its own process, ``python -m agentgrad resume RUN_DIR --json``
(the CLI's detached run), in a new session so it outlives the service; its output goes to ``RUN_DIR/run.log``.

A worker this process started is reaped here (`reap`); one a previous service process started is found by its pid
(alive and running agentgrad, as `agentgrad status` checks).
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path

from agentgrad.cli.rundir import RunDir, process_alive, runs_agentgrad


class Workers:
    """Starts, signals and watches worker processes.

    Args:
        python: the interpreter to run them with.
        env: their environment (default: this process's).
    State: the `Popen` of every worker started here and not yet reaped.
    """

    def __init__(self, python: str, env: Mapping[str, str] | None = None) -> None:
        self._python = python
        self._env = dict(env) if env is not None else None
        self._children: dict[int, subprocess.Popen[bytes]] = {}

    def spawn(self, run_dir: Path) -> int:
        """Start a worker running (or resuming) the run in `run_dir`; its pid."""
        target = RunDir(run_dir)
        command = [self._python, "-m", "agentgrad", "resume", str(run_dir.resolve()), "--json"]
        with target.log_file.open("ab") as out:
            child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                     start_new_session=True, env=self._env, cwd=str(run_dir))
        self._children[child.pid] = child
        target.write_pid(child.pid)
        return child.pid

    def reap(self) -> None:
        """Collect the exit status of finished workers started here (so none lingers as a zombie)."""
        for pid, child in list(self._children.items()):
            if child.poll() is not None:
                del self._children[pid]

    def alive(self, pid: int | None) -> bool:
        """True if `pid` is a live agentgrad process."""
        if pid is None:
            return False
        child = self._children.get(pid)
        if child is not None:
            return child.poll() is None
        return process_alive(pid) and runs_agentgrad(pid)

    def interrupt(self, pid: int) -> None:
        """Ask a worker to stop cleanly (SIGINT: the run cancels, charging calls in flight, and can be resumed)."""
        if self.alive(pid):
            try:
                os.kill(pid, signal.SIGINT)
            except ProcessLookupError:
                return

    def close(self) -> None:
        """Forget the workers started here (they go on running: the next service takes them up)."""
        self.reap()
        self._children.clear()
