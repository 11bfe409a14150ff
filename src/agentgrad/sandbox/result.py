"""What one run of sandboxed code gave back: its output, how it ended, what it used, and which limit stopped it."""

from __future__ import annotations

import enum
import signal as signals
from dataclasses import dataclass


class LimitHit(str, enum.Enum):
    """The limit that ended a run (`NONE`: the code ended by itself, successfully or not)."""

    NONE = "none"
    CPU = "cpu"
    MEMORY = "memory"
    FILE_SIZE = "file_size"
    PROCESSES = "processes"
    WALL_CLOCK = "wall_clock"
    OUTPUT = "output"


@dataclass(frozen=True)
class SandboxResult:
    """One run of sandboxed code. Every failure of the code is here, never raised.

    Args:
        stdout, stderr: what the code wrote (UTF-8, invalid bytes replaced), at most `Limits.output_bytes` each.
        exit_code: its exit status, or None when a signal killed it.
        signal: the signal that killed it, or None when it exited.
        limit_hit: the limit that ended the run. `CPU`, `WALL_CLOCK` and `OUTPUT` are what the sandbox saw;
            `FILE_SIZE` is the kernel's SIGXFSZ or, in Python code, an uncaught EFBIG error; `MEMORY` and
            `PROCESSES` are uncaught `MemoryError` and process or thread creation errors (EAGAIN) in Python code
            run by `Sandbox.run_python`. Code can fake any of these about itself: report them, do not reward them.
        cpu_seconds: user and system CPU time of the code's processes.
        max_rss_bytes: the largest resident set of any one of them.
        wall_seconds: real time from start to the end of the last process.
        stdout_truncated, stderr_truncated: the stream went past `Limits.output_bytes`.
    """

    stdout: str
    stderr: str
    exit_code: int | None
    signal: int | None
    limit_hit: LimitHit
    cpu_seconds: float
    max_rss_bytes: int
    wall_seconds: float
    stdout_truncated: bool = False
    stderr_truncated: bool = False

    @property
    def ok(self) -> bool:
        """The code exited with status 0 within every limit."""
        return self.exit_code == 0 and self.limit_hit is LimitHit.NONE

    def describe(self) -> str:
        """How the run ended, in a few words ("exit status 1", "killed by SIGXCPU at the cpu limit")."""
        if self.signal is not None:
            try:
                ended = f"killed by {signals.Signals(self.signal).name}"
            except ValueError:
                ended = f"killed by signal {self.signal}"
        else:
            ended = f"exit status {self.exit_code}"
        if self.limit_hit is LimitHit.NONE:
            return ended
        return f"{ended} at the {self.limit_hit.value} limit"
