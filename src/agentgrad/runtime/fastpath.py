"""The fast path for plain reward functions: call one that proves fast on the event loop, not in a thread.

A synchronous user function normally runs in a worker thread, so a slow one never blocks the event loop. For a
reward that is a comparison of two strings, the hop to a thread costs more than the function (about 0.2 ms of
CPU per call, a third of the framework's cost per rollout). `FastPath` times the threaded calls; after `probes` in
a row under `fast` seconds, later calls run inline. One inline call slower than `slow` sends the function back to
threads for good, so a function that turns slow blocks the loop at most once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

PROBE, INLINE, THREADS = "probe", "inline", "threads"


class FastPath:
    """Decides where a plain function runs.

    Args:
        enabled: False keeps every call in a thread.
        probes: threaded calls in a row that must be fast before calls run inline.
        fast: seconds a probed call may take.
        slow: seconds an inline call may take before the function goes back to threads for good.
    State: `mode` (probe, inline or threads) and the fast calls in a row so far.
    """

    def __init__(self, *, enabled: bool = True, probes: int = 16, fast: float = 0.0005, slow: float = 0.005) -> None:
        self.mode = PROBE if enabled else THREADS
        self.probes, self.fast, self.slow = probes, fast, slow
        self.fast_in_a_row = 0

    @property
    def inline(self) -> bool:
        """True when the next call should run on the event loop."""
        return self.mode == INLINE

    def observe(self, seconds: float) -> None:
        """Record how long a call took (where it ran is the current mode)."""
        if self.mode == INLINE:
            if seconds > self.slow:
                self.mode = THREADS
        elif self.mode == PROBE:
            self.fast_in_a_row = self.fast_in_a_row + 1 if seconds <= self.fast else 0
            if self.fast_in_a_row >= self.probes:
                self.mode = INLINE


def timed(fn: Callable[..., Any], args: tuple[Any, ...], clock: Callable[[], float]) -> tuple[Any, float]:
    """`fn(*args)` and the seconds it took by `clock` (runs in the thread that calls it)."""
    start = clock()
    value = fn(*args)
    return value, clock() - start
