"""Small test helpers: a sleep that records its waits, and the usual messages."""

from __future__ import annotations

import asyncio

from agentgrad.providers.base import Message
from agentgrad.testing.clock import FakeClock

USER = (Message("user", "hello brave new world"),)


class RecordingSleep:
    """An async sleep that takes no real time, records each wait, and advances `clock` if given."""

    def __init__(self, clock: FakeClock | None = None) -> None:
        self.waits: list[float] = []
        self.clock = clock

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        if self.clock is not None:
            self.clock.advance(seconds)
        await asyncio.sleep(0)
