"""What one run of sandboxed code may use, and the kernel resource limits (`setrlimit`) that enforce it."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from agentgrad.sandbox.errors import SandboxConfigError

_INTEGERS = ("cpu_seconds", "memory_bytes", "file_bytes", "processes", "output_bytes")


@dataclass(frozen=True)
class Limits:
    """Limits of one run. Every field must be positive.

    Args:
        cpu_seconds: CPU time of each process (`RLIMIT_CPU`, whole seconds): SIGXCPU at the limit, SIGKILL one
            second later if the code catches it.
        memory_bytes: address space of each process (`RLIMIT_AS`): allocations past it fail (Python raises
            `MemoryError`). This counts virtual memory, which some libraries reserve generously (OpenBLAS threads).
        file_bytes: size of any file a process writes (`RLIMIT_FSIZE`): the write fails (SIGXFSZ, or `OSError`
            EFBIG in Python).
        processes: processes and threads the code may have at once (`RLIMIT_NPROC`, counted for the user the code
            runs as, which is its own).
        wall_seconds: real time of the run; past it every process of the run is killed.
        output_bytes: bytes kept of stdout and of stderr, each; past it the run is killed and the stream is marked
            truncated.
    """

    cpu_seconds: int = 10
    memory_bytes: int = 1 << 30
    file_bytes: int = 64 << 20
    processes: int = 64
    wall_seconds: float = 30.0
    output_bytes: int = 1 << 20

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            integer = item.name in _INTEGERS
            kinds = (int,) if integer else (int, float)
            if isinstance(value, bool) or not isinstance(value, kinds):
                raise SandboxConfigError(f"Limits.{item.name} must be {'an int' if integer else 'a number'}, "
                                         f"not {value!r}")
            if not math.isfinite(value) or value <= 0:
                raise SandboxConfigError(f"Limits.{item.name} must be positive and finite, not {value!r}")

    def rlimits(self, *, extra_processes: int = 0) -> tuple[tuple[str, int, int], ...]:
        """(name, soft, hard) of each `resource` limit a run sets; `extra_processes` are tasks the kernel counts
        with the code's own (the sandbox's helpers, when they run as the same user)."""
        return (
            ("RLIMIT_CPU", self.cpu_seconds, self.cpu_seconds + 1),
            ("RLIMIT_AS", self.memory_bytes, self.memory_bytes),
            ("RLIMIT_FSIZE", self.file_bytes, self.file_bytes),
            ("RLIMIT_NPROC", self.processes + extra_processes, self.processes + extra_processes),
            ("RLIMIT_CORE", 0, 0),
        )
