"""Hedged calls: a call that runs far past its expected time gets a twin; the first answer wins.

Under heavy-tailed latency a few calls take a hundred times the median, and a gate evaluation whose verdict needs
that one task waits for it (at the end of a run, the whole run does). `first_of` starts one attempt; once that
attempt has its slot and has run `delay` seconds without an answer, it starts a second, identical attempt. The
first to finish is the result, the other is cancelled (a cancelled call is still charged its budget). A second
attempt the budget cannot pay for is not made.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

import anyio

from agentgrad.runtime.budget import OutOfBudget

T = TypeVar("T")
Attempt = Callable[[Callable[[], None]], Awaitable[T]]  # called with `started`, to call when its slot is granted


class _Race(Generic[T]):
    def __init__(self) -> None:
        self.result: list[T] = []
        self.hedged = False
        self.short: OutOfBudget | None = None  # the first attempt could not be paid for


async def first_of(attempt: Attempt[T], delay: float) -> tuple[T, bool]:
    """`attempt(started)`'s result, and whether a second attempt was started; see the module doc.

    `attempt` must call `started()` once its call begins (e.g. from `Caller.call(late=...)`); `delay` counts
    from then. OutOfBudget from the first attempt propagates; from the second, it only means no hedge.
    """
    race: _Race[T] = _Race()
    began = anyio.Event()

    async with anyio.create_task_group() as group:
        async def run(first: bool) -> None:
            try:
                value = await attempt(began.set if first else _nothing)
            except OutOfBudget as exc:
                if first:  # raised below, not from inside the task group (callers catch it by type)
                    race.short = exc
                    group.cancel_scope.cancel()
                return
            if not race.result:
                race.result.append(value)
                group.cancel_scope.cancel()

        async def hedge() -> None:
            await began.wait()
            await anyio.sleep(delay)
            race.hedged = True
            await run(False)

        group.start_soon(run, True)
        group.start_soon(hedge)
    if race.short is not None:
        raise race.short
    return race.result[0], race.hedged


def _nothing() -> None:
    return None
