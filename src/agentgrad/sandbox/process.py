"""Start the launcher in its namespaces and watch it from outside: feed stdin, keep bounded stdout and stderr,
stop the run at the wall clock or when output overflows, and read the launcher's report.

Stopping closes the control pipe: the launcher then kills every process of the run's PID namespace and still
reports what they used. If it does not answer within `GRACE` seconds, the whole process group is killed; the
namespace dies with the launcher, so nothing the code started outlives the run.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from agentgrad.sandbox.errors import SandboxError
from agentgrad.sandbox.limits import Limits
from agentgrad.sandbox.mounts import MountPlan
from agentgrad.sandbox.result import LimitHit

LAUNCHER = Path(__file__).with_name("launcher.py")
GRACE = 2.0  # seconds the launcher has to stop the code, and then the kernel to end the process group
CHUNK = 65536


@dataclass(frozen=True)
class Launch:
    """Everything one run needs.

    Args:
        unshare: the `unshare` binary; `flags` its options.
        argv, env, cwd: what is executed, with which environment, where (the working directory).
        uid: the user the code runs as, or None to stay root of a user namespace without capabilities.
        plan: the mounts of the run.
        limits: its limits; `extra_processes` more tasks are allowed for helpers counted as the same user.
        note_fd: the descriptor the Python bootstrap notes a limit on, or None for other programs.
        stdin: bytes for the code's stdin (None: it reads end of file).
    """

    unshare: str
    flags: tuple[str, ...]
    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: str
    uid: int | None
    plan: MountPlan
    limits: Limits
    extra_processes: int = 0
    note_fd: int | None = None
    stdin: bytes | None = None


@dataclass(frozen=True)
class Outcome:
    """What came back from one run, before it is judged.

    Args:
        stopped: why the parent stopped the run (`WALL_CLOCK`, `OUTPUT`), or None.
        killed: the launcher killed the code (after `stopped`); False when it had already exited.
        status: the code's wait status, or None when the run had to be torn down without a report.
        note: the limit the Python bootstrap noted ("memory", "processes", "file_size"), or None.
    """

    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool
    stopped: LimitHit | None
    killed: bool
    status: int | None
    cpu_seconds: float
    max_rss_bytes: int
    wall_seconds: float
    note: str | None


@dataclass
class _Stream:
    """One output stream, kept up to its limit."""

    limit: int
    data: bytearray = field(default_factory=bytearray)
    truncated: bool = False

    def take(self, chunk: bytes) -> bool:
        """Keep what fits; True when the stream has just gone past its limit."""
        room = self.limit - len(self.data)
        self.data += chunk[:max(room, 0)]
        passed = len(chunk) > room and not self.truncated
        self.truncated = self.truncated or len(chunk) > room
        return passed


def launch(spec: Launch) -> Outcome:
    """Run `spec` to its end; raises SandboxError only when the sandbox itself failed."""
    status_read, status_write = os.pipe()
    control_read, control_write = os.pipe()
    started = time.monotonic()
    try:
        process = subprocess.Popen(
            command(spec, status_write, control_read), stdin=subprocess.PIPE if spec.stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={}, cwd="/", pass_fds=(status_write, control_read),
            start_new_session=True)
    except OSError as error:
        for end in (status_read, status_write, control_read, control_write):
            os.close(end)
        raise SandboxError(f"cannot start {spec.unshare}: {error}") from error
    os.close(status_write)
    os.close(control_read)
    watch = _Watch(process, spec, status_read, control_write, started)
    try:
        watch.pump()
    finally:
        watch.close()
    return watch.outcome(time.monotonic() - started)


def command(spec: Launch, status_fd: int, control_fd: int) -> list[str]:
    """The argv that starts the launcher in new namespaces."""
    plan = spec.plan
    config = {
        "argv": list(spec.argv), "env": dict(spec.env), "cwd": spec.cwd, "uid": spec.uid,
        "plan": {"hide": list(plan.hide), "expose": list(plan.expose), "writable": plan.writable,
                 "links": [list(link) for link in plan.links], "sysfs": plan.sysfs},
        "rlimits": [list(item) for item in spec.limits.rlimits(extra_processes=spec.extra_processes)],
        "note_fd": spec.note_fd, "status_fd": status_fd, "control_fd": control_fd,
    }
    return [spec.unshare, *spec.flags, "--", sys.executable, "-I", "-S", "-B", str(LAUNCHER), json.dumps(config)]


class _Watch:
    """The parent's side of one run: pipes in and out, the clock, and stopping."""

    def __init__(self, process: subprocess.Popen[bytes], spec: Launch, status_fd: int, control_fd: int,
                 started: float) -> None:
        self.process, self.spec, self.control_fd = process, spec, control_fd
        self.streams = {"stdout": _Stream(spec.limits.output_bytes), "stderr": _Stream(spec.limits.output_bytes)}
        self.status = bytearray()
        self.stopped: LimitHit | None = None
        self.deadline = started + spec.limits.wall_seconds
        self.backstop: float | None = None  # when to kill the process group, once stopping has begun
        self.torn_down = False
        self.selector = selectors.DefaultSelector()
        self.selector.register(_fd(process.stdout), selectors.EVENT_READ, "stdout")
        self.selector.register(_fd(process.stderr), selectors.EVENT_READ, "stderr")
        self.selector.register(status_fd, selectors.EVENT_READ, "status")
        self.pending = memoryview(spec.stdin or b"")
        if process.stdin is not None:
            os.set_blocking(process.stdin.fileno(), False)
            self.selector.register(process.stdin.fileno(), selectors.EVENT_WRITE, "stdin")

    def pump(self) -> None:
        """Move data until every output pipe is closed (every process of the run has ended)."""
        while self._reading():
            now = time.monotonic()
            if self.stopped is None and now >= self.deadline:
                self.stop(LimitHit.WALL_CLOCK)
            if self.backstop is not None and now >= self.backstop:
                self.tear_down()
            wake = self.backstop if self.backstop is not None else self.deadline
            for key, _ in self.selector.select(max(wake - now, 0.0)):
                self.handle(int(key.fd), str(key.data))

    def _reading(self) -> bool:
        """Some output pipe is still open: a process of the run may still be alive."""
        return any(key.data != "stdin" for key in self.selector.get_map().values())

    def handle(self, fd: int, name: str) -> None:
        if name == "stdin":
            self.feed(fd)
            return
        try:
            chunk = os.read(fd, CHUNK)
        except BlockingIOError:
            return
        if not chunk:
            self.selector.unregister(fd)
            if name == "status":
                os.close(fd)
        elif name == "status":
            self.status += chunk
        elif self.streams[name].take(chunk) and self.stopped is None:
            self.stop(LimitHit.OUTPUT)

    def feed(self, fd: int) -> None:
        """Write what stdin still has to give; a code that stops reading is its own business."""
        try:
            written = os.write(fd, self.pending[:CHUNK])
        except BlockingIOError:
            return
        except BrokenPipeError:
            written = len(self.pending)
        self.pending = self.pending[written:]
        if not self.pending:
            self.selector.unregister(fd)
            if self.process.stdin is not None:
                self.process.stdin.close()

    def stop(self, reason: LimitHit) -> None:
        """Ask the launcher to kill the run (by closing the control pipe), and start the backstop clock."""
        self.stopped = reason
        self.close_control()
        self.backstop = time.monotonic() + GRACE

    def tear_down(self) -> None:
        """The launcher did not stop the run in time: kill the process group (the namespace dies with it)."""
        if self.torn_down:
            raise SandboxError(f"the sandbox's processes (group {self.process.pid}) did not end after SIGKILL")
        self.torn_down = True
        self.backstop = time.monotonic() + GRACE
        _kill_group(self.process.pid)

    def close_control(self) -> None:
        if self.control_fd >= 0:
            os.close(self.control_fd)
            self.control_fd = -1

    def close(self) -> None:
        """Release everything, killing the run first if it is still going (an error or a cancellation)."""
        self.close_control()
        if self._reading():
            _kill_group(self.process.pid)
        for key in list(self.selector.get_map().values()):
            if key.data == "status":
                os.close(int(key.fd))
        self.selector.close()
        for pipe in (self.process.stdin, self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()
        self.process.wait()

    def outcome(self, wall_seconds: float) -> Outcome:
        report = self.report()
        stdout, stderr = self.streams["stdout"], self.streams["stderr"]
        status = report.get("status")
        return Outcome(
            stdout=bytes(stdout.data), stderr=bytes(stderr.data), stdout_truncated=stdout.truncated,
            stderr_truncated=stderr.truncated, stopped=self.stopped, killed=bool(report.get("killed")),
            status=None if status is None else int(status), cpu_seconds=float(report.get("cpu_seconds", 0.0)),
            max_rss_bytes=int(report.get("max_rss_kib", 0)) * 1024, wall_seconds=wall_seconds,
            note=report.get("note"))

    def report(self) -> dict[str, Any]:
        """The launcher's report; raises SandboxError when the sandbox failed rather than the code."""
        if not self.status:
            if self.torn_down:
                return {}
            tail = bytes(self.streams["stderr"].data[-2000:]).decode(errors="replace").strip()
            raise SandboxError(f"the sandbox did not start (exit status {self.process.returncode}): {tail}")
        report: dict[str, Any] = json.loads(self.status)
        if "error" in report:
            raise SandboxError(f"the sandbox could not set up the run: {report['error']}")
        return report


def _fd(pipe: IO[bytes] | None) -> int:
    if pipe is None:
        raise SandboxError("subprocess.Popen gave no pipe for an output stream")
    return pipe.fileno()


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:  # everything in it has ended already
        return
