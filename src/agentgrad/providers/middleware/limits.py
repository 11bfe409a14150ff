"""`ConcurrencyLimit` (at most N calls in flight) and `RateLimit` (a token bucket on call starts)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from agentgrad.core._checks import integer, number
from agentgrad.providers.base import Completion, Message, Provider
from agentgrad.providers.middleware.base import Middleware


class ConcurrencyLimit(Middleware):
    """At most `limit` calls in flight through this layer; the others wait their turn (FIFO).

    Put it inside `Retry`, so a call that sleeps before its next attempt does not hold a slot.
    State: the semaphore of the current event loop, the calls in flight and their peak.
    """

    def __init__(self, inner: Provider, limit: int) -> None:
        integer(limit, "ConcurrencyLimit limit", low=1)
        super().__init__(inner)
        self.limit = limit
        self.in_flight = 0
        self.peak = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sem = asyncio.Semaphore(limit)

    async def complete(self, messages: Sequence[Message], **params: Any) -> Completion:
        """Wait for a slot, then call through."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a semaphore belongs to one loop (the sync façade makes a loop per call)
            self._loop, self._sem = loop, asyncio.Semaphore(self.limit)
        async with self._sem:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            try:
                return await self.inner.complete(messages, **params)
            finally:
                self.in_flight -= 1


class RateLimit(Middleware):
    """A token bucket: calls start at most `rate` per second on average, with bursts of up to `burst`.

    Implemented as a virtual schedule (GCRA): each call reserves the next start time when it arrives, so
    waiting calls keep their order and their spacing is exact. A call cancelled while waiting keeps its token.

    Args:
        inner: the provider.
        rate: calls per second (> 0).
        burst: calls that may start at once after an idle period (>= 1).
        clock: monotonic seconds; sleep: the async sleep (tests pass a fake clock's pair).
    State: the theoretical arrival time of the next call.
    """

    def __init__(self, inner: Provider, *, rate: float, burst: int = 1, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[object]] = asyncio.sleep) -> None:
        checked_rate = number(rate, "RateLimit rate", above=0, finite=False)
        checked_burst = integer(burst, "RateLimit burst", low=1)
        super().__init__(inner)
        self.rate, self.burst = checked_rate, checked_burst
        self._clock = clock
        self._sleep = sleep
        self._tat: float | None = None

    def reserve(self) -> float:
        """Take the next token; returns the seconds the caller must wait before it starts."""
        now = self._clock()
        interval = 1.0 / self.rate
        tat = now if self._tat is None else max(self._tat, now)
        wait = max(tat - (self.burst - 1) * interval - now, 0.0)
        self._tat = tat + interval
        return wait

    async def complete(self, messages: Sequence[Message], **params: Any) -> Completion:
        """Wait for a token, then call through."""
        wait = self.reserve()
        if wait > 0:
            await self._sleep(wait)
        return await self.inner.complete(messages, **params)
