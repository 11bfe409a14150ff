"""Calling the user's functions: sync or async, bounded, timed out, and validated.

`run(rendered, task)` and `propose(rendered, task, output, reward)` may be plain or `async def` functions.
Synchronous ones run in a bounded thread pool (an anyio `CapacityLimiter`); every call has a timeout. Their
failures are per-example evidence (`CallOutcome.error`); a broken `reward` is systemic and raises `RewardError`.
Note: a hanging *synchronous* function cannot be killed; after its timeout its thread is abandoned and keeps its
pool slot until it returns. Async functions are cancelled cleanly.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread

from agentgrad.errors import RewardError

MAX_OUTPUT_CHARS = 1_000_000


@dataclass(frozen=True)
class Usage:
    """Tokens and cost a call reports (a user function may return an object with `.text` and `.usage`)."""

    tokens: int = 0
    cost: float = 0.0


@dataclass(frozen=True)
class CallOutcome:
    """What one call produced: a value, or the error that is this example's evidence."""

    value: Any
    error: str | None
    seconds: float
    usage: Usage = Usage()

    @property
    def ok(self) -> bool:
        return self.error is None


def _usage_of(value: Any) -> Usage:
    usage = getattr(value, "usage", None)
    if usage is None:
        return Usage()
    tokens = int(getattr(usage, "tokens", 0) or 0) + int(getattr(usage, "input_tokens", 0) or 0) \
        + int(getattr(usage, "output_tokens", 0) or 0)
    return Usage(tokens, float(getattr(usage, "cost", 0.0) or 0.0))


def _text_of(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    text = getattr(value, "text", None)
    return text if isinstance(text, str) else None


class Caller:
    """Runs user functions with a thread-pool bound and a timeout; `clock` is the injected time port."""

    def __init__(self, *, threads: int, timeout: float, clock: Callable[[], float]) -> None:
        self.limiter = anyio.CapacityLimiter(max(1, threads))
        self.timeout = timeout
        self.clock = clock

    async def call(self, fn: Callable[..., Any], *args: Any) -> CallOutcome:
        """Call `fn(*args)`; exceptions and timeouts become an outcome with an error, never a raise."""
        start = self.clock()
        try:
            with anyio.fail_after(self.timeout):
                if inspect.iscoroutinefunction(fn):
                    value = await fn(*args)
                else:
                    value = await anyio.to_thread.run_sync(lambda: fn(*args), limiter=self.limiter,
                                                           abandon_on_cancel=True)
                    if inspect.isawaitable(value):
                        value = await value
        except TimeoutError:
            return CallOutcome(None, f"timed out after {self.timeout:g} s", self.clock() - start)
        except Exception as exc:  # noqa: BLE001 - a user function's failure is this example's evidence
            return CallOutcome(None, f"{type(exc).__name__}: {exc}"[:500], self.clock() - start)
        return CallOutcome(value, None, self.clock() - start, _usage_of(value))

    async def run(self, fn: Callable[..., Any], rendered: str, task: Any) -> CallOutcome:
        """Call `run` and check that it returned text (a string, or an object with a `.text` string)."""
        outcome = await self.call(fn, rendered, task)
        if not outcome.ok:
            return outcome
        text = _text_of(outcome.value)
        if text is None:
            kind = "None" if outcome.value is None else type(outcome.value).__name__
            return CallOutcome(None, f"run returned {kind}, expected a string", outcome.seconds, outcome.usage)
        if len(text) > MAX_OUTPUT_CHARS:
            return CallOutcome(None, f"run returned {len(text)} characters (limit {MAX_OUTPUT_CHARS})",
                               outcome.seconds, outcome.usage)
        return CallOutcome(text, None, outcome.seconds, outcome.usage)

    async def reward(self, fn: Callable[..., Any], task: Any, task_id: str, output: str) -> float:
        """Call `reward`; anything but a finite number in [0, 1] raises `RewardError` naming the task."""
        try:
            value: Any = fn(task, output)
            if isinstance(value, Awaitable):
                value = await value
        except Exception as exc:
            raise RewardError(f"reward raised on task {task_id!r}: {type(exc).__name__}: {exc}") from exc
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise RewardError(f"reward returned {type(value).__name__} on task {task_id!r}, expected a float in [0, 1]")
        score = float(value)
        if math.isnan(score) or not 0.0 <= score <= 1.0:
            raise RewardError(f"reward returned {score!r} on task {task_id!r}, outside [0, 1]")
        return score
