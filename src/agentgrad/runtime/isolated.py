"""`in_subprocess`: run a synchronous user function in a worker process, so that a call which hangs can be killed.

By default `evolve` runs a synchronous `run`, `propose` or `reward` in a daemon thread: a call past its
`RunConfig.timeout` is abandoned, the run goes on, and the process can exit, but the hung thread keeps its CPU,
memory and open connections until it returns on its own, which may be never. Wrap the function to opt in to a
worker process instead:

    evolve(..., run=in_subprocess(my_run))

Each call runs in one of anyio's worker processes; a call cut off by the timeout (or the end of the run) has its
process killed with SIGKILL, and the next call gets a fresh one. The price: the function and its arguments cross a
process boundary, so the function must be importable by name (defined at a module's top level, not a lambda or a
closure), its arguments and result must be picklable (the rendered text, a `Task`, a string output: they are), and
each call pays the round trip (about a millisecond once the worker is up; the first call starts the worker).
Nothing the function keeps in memory survives from one call to the next once a worker was killed.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

import anyio
import anyio.lowlevel
import anyio.to_process

from agentgrad.core._checks import integer
from agentgrad.errors import ConfigError

P = ParamSpec("P")
R = TypeVar("R")


def _importable(fn: Callable[..., Any]) -> bool:
    """True if a worker process can find `fn` by its module and qualified name."""
    module, name = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    return bool(module) and module != "__main__" and "<" not in name


def in_subprocess(fn: Callable[P, R], *, processes: int | None = None) -> Callable[P, Awaitable[R]]:
    """`fn` as an async function whose every call runs in a worker process, killed if the call is cut off.

    Args:
        fn: a synchronous function defined at the top level of an importable module.
        processes: at most this many calls at once in their own processes (default: anyio's, the CPU count).
    Raises:
        ConfigError: `fn` is a coroutine function, or a worker process could not import it.
    """
    if not callable(fn):
        raise ConfigError(f"in_subprocess takes a function, got {type(fn).__name__}")
    if inspect.iscoroutinefunction(fn):
        raise ConfigError(f"in_subprocess: {fn.__qualname__} is async; it takes a synchronous function")
    if not _importable(fn):
        raise ConfigError(f"in_subprocess: {getattr(fn, '__qualname__', fn)!r} cannot be found by a worker process; "
                          "define it at the top level of a module the worker can import (not in __main__, not a "
                          "lambda or a nested function)")
    if processes is not None:
        integer(processes, "in_subprocess: processes", low=1)
    limiters: dict[object, anyio.CapacityLimiter] = {}  # one per event loop (`evolve` runs one per call)

    def limiter() -> anyio.CapacityLimiter | None:
        if processes is None:
            return None
        loop = anyio.lowlevel.current_token()
        if loop not in limiters:
            limiters.clear()
            limiters[loop] = anyio.CapacityLimiter(processes)
        return limiters[loop]

    @functools.wraps(fn)
    async def call(*args: P.args, **kwargs: P.kwargs) -> R:
        if kwargs:
            raise ConfigError("in_subprocess: call with positional arguments only")
        return await anyio.to_process.run_sync(fn, *args, cancellable=True, limiter=limiter())

    return call


__all__ = ["in_subprocess"]
