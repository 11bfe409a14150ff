"""`LoopScoped`: one async resource (an HTTP client) per running event loop, closed when that loop shuts down.

An async HTTP client's pooled connections belong to the event loop that opened them, so a provider used from
several `asyncio.run` calls (the sync façade) needs a fresh client per loop. The old client is closed by an
async generator that `asyncio.run` finalises at shutdown (`loop.shutdown_asyncgens`), so no socket leaks.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")


async def _closer(close: Callable[[], Awaitable[object]]) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        await close()


class LoopScoped(Generic[T]):
    """Makes `factory()` once per running loop; `close(resource)` runs when that loop shuts down or on `aclose`.

    State: the resource for the most recent loop, that loop, and the generator that will close it.
    """

    def __init__(self, factory: Callable[[], T], close: Callable[[T], Awaitable[object]]) -> None:
        self._factory = factory
        self._close = close
        self._loop: asyncio.AbstractEventLoop | None = None
        self._value: T | None = None
        self._guard: AsyncGenerator[None, None] | None = None

    async def get(self) -> T:
        """The resource for the running loop, made on first use in that loop."""
        loop = asyncio.get_running_loop()
        if self._loop is loop and self._value is not None:
            return self._value
        value = self._factory()
        guard = _closer(lambda: self._close(value))
        self._loop, self._value, self._guard = loop, value, guard
        await guard.__anext__()  # runs to its `yield`: from now on the loop's shutdown closes `value`
        return value

    async def aclose(self) -> None:
        """Close the resource of the running loop now (a resource of another loop is left to that loop)."""
        guard, same = self._guard, self._loop is asyncio.get_running_loop()
        self._loop, self._value, self._guard = None, None, None
        if guard is not None and same:
            await guard.aclose()
