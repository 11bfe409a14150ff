"""`FakeClock`: a clock for tests that only moves when told to, and an async `sleep` that takes no real time."""

from __future__ import annotations

import asyncio

from agentgrad.core._checks import number
from agentgrad.errors import ConfigError


def _check(dt: float, what: str) -> float:
    return number(dt, f"FakeClock.{what}")


class FakeClock:
    """A monotonic fake clock.

    Args:
        start: the time `now()` reports before any advance.
    State: the current time, which only grows (by `advance` or `sleep`).

    >>> clock = FakeClock()
    >>> clock.advance(2.5)
    >>> clock.now()
    2.5
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = _check(start, "start")

    def now(self) -> float:
        """The current fake time, in seconds."""
        return self._now

    def advance(self, dt: float) -> None:
        """Move the time forward by `dt` seconds; a negative `dt` is refused (the clock is monotonic)."""
        step = _check(dt, "advance")
        if step < 0:
            raise ConfigError(f"FakeClock.advance cannot go back in time (dt={dt!r})")
        self._now += step

    async def sleep(self, dt: float) -> None:
        """Advance by `dt` (negative counts as 0, like `asyncio.sleep`) and let other tasks run once."""
        self.advance(max(_check(dt, "sleep"), 0.0))
        await asyncio.sleep(0)
