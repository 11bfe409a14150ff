"""`PrioritySemaphore`: a counting semaphore whose waiters are served by priority, then in arrival order.

The user's `run` slots are shared by rollouts and gate evaluations. When the gate is the bottleneck, a gate call
waiting for a slot should not queue behind rollouts that only make more proposals for the gate to evaluate, so
gate calls ask with a higher priority (a lower number). Single event loop, no locks.
"""

from __future__ import annotations

import heapq
import itertools
from types import TracebackType

import anyio


class PrioritySemaphore:
    """At most `size` holders; a released slot goes to the waiter with the lowest (priority, arrival).

    State: free slots, a heap of waiters (each an event set when the slot is handed to it), an arrival counter.
    """

    def __init__(self, size: int) -> None:
        self.size = max(1, int(size))
        self.free = self.size
        self._waiters: list[tuple[int, int, anyio.Event]] = []
        self._arrivals = itertools.count()

    @property
    def waiting(self) -> int:
        """How many tasks wait for a slot."""
        return len(self._waiters)

    async def acquire(self, priority: int = 0) -> None:
        """Take a slot, waiting for one if none is free; a cancelled wait takes nothing."""
        await anyio.lowlevel.checkpoint_if_cancelled()
        if self.free > 0 and not self._waiters:
            self.free -= 1
            await anyio.lowlevel.cancel_shielded_checkpoint()
            return
        entry = (priority, next(self._arrivals), anyio.Event())
        heapq.heappush(self._waiters, entry)
        try:
            await entry[2].wait()
        except BaseException:
            if entry[2].is_set():
                self.release()  # the slot was handed over just as the wait was cancelled: pass it on
            else:
                self._waiters.remove(entry)
                heapq.heapify(self._waiters)
            raise

    def release(self) -> None:
        """Give the slot back: to the best waiter if there is one, else to the free pool."""
        if self._waiters:
            heapq.heappop(self._waiters)[2].set()
            return
        if self.free >= self.size:
            raise RuntimeError("PrioritySemaphore released more often than acquired")
        self.free += 1

    def hold(self, priority: int = 0) -> _Held:
        """`async with semaphore.hold(priority):` takes a slot for the block."""
        return _Held(self, priority)


class _Held:
    def __init__(self, semaphore: PrioritySemaphore, priority: int) -> None:
        self.semaphore, self.priority = semaphore, priority

    async def __aenter__(self) -> None:
        await self.semaphore.acquire(self.priority)

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        self.semaphore.release()
