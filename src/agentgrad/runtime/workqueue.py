"""`WorkQueue`: the gate's inbox — a bounded lane for new proposals and an urgent lane for work sent back.

The aggregator sends back candidates that passed on an older head (a cheap re-check decides them) and candidates
held for a full check. They are worth more than a fresh proposal, so gate workers take them first. The aggregator
must never wait on the gate (the gate waits on the aggregator), so the urgent lane does not block its sender; it
stays bounded all the same, because every item in it is a diff the run holds open, and new diffs enter only
through the bounded normal lane.

Single event loop, no locks: every change of state sets an event that waiting tasks re-check.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator
from typing import Generic, TypeVar

import anyio

T = TypeVar("T")


class WorkQueue(Generic[T]):
    """A two-lane queue; iteration ends once every producer is done and both lanes are empty.

    Args:
        capacity: how many normal items may wait before `put` blocks (backpressure on proposers).
        producers: how many producers will call `producer_done` (each exactly once).
    State: the two lanes, the number of producers still open, and the event that wakes waiters.
    """

    def __init__(self, capacity: int, producers: int) -> None:
        self.capacity = max(1, capacity)
        self._open = producers
        self._normal: deque[T] = deque()
        self._urgent: deque[T] = deque()
        self._changed = anyio.Event()

    def __len__(self) -> int:
        return len(self._normal) + len(self._urgent)

    @property
    def full(self) -> bool:
        """True when a `put` would wait."""
        return len(self._normal) >= self.capacity

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def put(self, item: T) -> None:
        """Add a normal item, waiting while `capacity` of them are queued."""
        while len(self._normal) >= self.capacity:
            await self._changed.wait()
        self._normal.append(item)
        self._notify()

    def put_urgent(self, item: T) -> None:
        """Add an item that is taken before every normal one (never blocks)."""
        self._urgent.append(item)
        self._notify()

    def producer_done(self) -> None:
        """One producer will add nothing more."""
        if self._open <= 0:
            raise RuntimeError("WorkQueue.producer_done called more often than there are producers")
        self._open -= 1
        self._notify()

    async def get(self) -> T:
        """The next item (urgent first); raises `anyio.EndOfStream` once nothing more can come."""
        while True:
            lane = self._urgent or self._normal
            if lane:
                item = lane.popleft()
                self._notify()
                return item
            if self._open <= 0:
                raise anyio.EndOfStream
            await self._changed.wait()

    async def __aiter__(self) -> AsyncIterator[T]:
        while True:
            try:
                yield await self.get()
            except anyio.EndOfStream:
                return
