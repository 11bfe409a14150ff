"""Calling the user's functions: sync or async, bounded, timed out, and validated.

`run(rendered, task)`, `propose(rendered, task, output, reward)` and `reward(task, output)` may be plain or
`async def` functions. Synchronous ones run in a bounded thread pool (an anyio `CapacityLimiter`); every call has
a timeout. Failures of `run` and `propose` are per-example evidence (`CallOutcome.error`); a broken `reward` is
systemic and raises `RewardError`, and a `SystemicError` (a rejected key, a missing model) raised by `run` or
`propose` is not evidence either: it propagates and stops the run.

`Slots` bounds how many calls of one user function run at once; `Caller(threads=n)` bounds how many threads are
inside synchronous user functions at once. An async function is cancelled cleanly on timeout. A hanging
*synchronous* function cannot be killed: after its timeout the caller moves on, but its thread keeps both its slot
and its place in the thread bound until the function really returns, so user code never runs in more threads, nor
a function more often at once, than allowed (a call queued behind it waits, and gives up at its own timeout
without starting).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import math
import numbers
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio

from agentgrad.errors import RewardError, SystemicError
from agentgrad.runtime.fastpath import THREADS, FastPath, timed
from agentgrad.runtime.priority import PrioritySemaphore

MAX_OUTPUT_CHARS = 1_000_000


class Straggler(Exception):
    """Raised by `Caller.invoke` when a call outlives its `patience` (shorter than the timeout): the caller may
    start it again (a hedge against a stuck request)."""

    def __init__(self, after: float) -> None:
        super().__init__(f"no answer after {after:g} s")
        self.after = after


class _Abandoned(Exception):
    """Raised in a worker thread whose caller gave up before the function could start."""


class ThreadBound:
    """At most `size` threads inside user functions at once, counted until each function really returns.

    Threads wait in `enter` (a condition variable, no polling); a waiting thread whose caller gave up
    (`abandoned` set, then `wake`) stops waiting and never starts the function. State: the number of holders.
    """

    def __init__(self, size: int) -> None:
        self.size = max(1, int(size))
        self.held = 0
        self._changed = threading.Condition()

    def enter(self, abandoned: threading.Event) -> bool:
        """Take a place, waiting for one; False (nothing taken) once `abandoned` is set."""
        with self._changed:
            while self.held >= self.size and not abandoned.is_set():
                self._changed.wait()
            if abandoned.is_set():
                return False
            self.held += 1
            return True

    def leave(self) -> None:
        """Give a place back (the function returned); RuntimeError if none is held."""
        with self._changed:
            if self.held <= 0:
                raise RuntimeError("ThreadBound left more often than entered")
            self.held -= 1
            self._changed.notify_all()

    def wake(self) -> None:
        """Let waiting threads look at their `abandoned` flag again."""
        with self._changed:
            self._changed.notify_all()


class Slots:
    """At most `size` concurrent calls of a user function, counted until each call really ends.

    State: an async priority semaphore (callers queue on it in the event loop, the most urgent first) and a
    `ThreadBound` held by the thread that runs a synchronous function, left only when that function returns (even
    after a timeout).
    """

    def __init__(self, size: int) -> None:
        self.size = max(1, int(size))
        self.queue = PrioritySemaphore(self.size)
        self.running = ThreadBound(self.size)


@dataclass(frozen=True)
class CallCost:
    """Tokens and cost a call reports (a user function may return an object with `.text` and `.usage`)."""

    tokens: int = 0
    cost: float = 0.0


@dataclass(frozen=True)
class CallOutcome:
    """What one call produced: a value, or the error that is this example's evidence."""

    value: Any
    error: str | None
    seconds: float
    usage: CallCost = CallCost()
    straggler: bool = False  # cut off at its patience: not evidence about the example, start it again

    @property
    def ok(self) -> bool:
        return self.error is None


def _count(value: object, what: str) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{what} must be a number, got {type(value).__name__}")
    number = float(value)
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"{what} must be finite and >= 0, got {number!r}")
    return number


def usage_of(value: Any) -> CallCost:
    """The usage a returned value reports (`.usage` with tokens, input/output tokens, cost); ValueError if bad."""
    usage = getattr(value, "usage", None)
    if usage is None:
        return CallCost()
    tokens = sum(_count(getattr(usage, name, 0), f"usage.{name}")
                 for name in ("tokens", "input_tokens", "output_tokens"))
    return CallCost(int(tokens), _count(getattr(usage, "cost", 0.0), "usage.cost"))


def _text_of(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    text = getattr(value, "text", None)
    return text if isinstance(text, str) else None


def _guarded(fn: Callable[..., Any], args: tuple[Any, ...], bounds: tuple[ThreadBound, ...],
             abandoned: threading.Event) -> Any:
    """Run `fn(*args)` in a worker thread, holding a place in each of `bounds` until it returns; `_Abandoned`
    (`fn` never started) if the caller gave up first."""
    entered: list[ThreadBound] = []
    try:
        for bound in bounds:
            if not bound.enter(abandoned):
                raise _Abandoned
            entered.append(bound)
        if abandoned.is_set():
            raise _Abandoned
        return fn(*args)
    finally:
        for bound in reversed(entered):
            bound.leave()


async def in_daemon_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)` in a new daemon thread, awaited. Cancelling the wait abandons the thread: it finishes on its own,
    and, being a daemon, never keeps the process from exiting (a hung synchronous user function would hold a
    pooled worker thread, which the interpreter joins at exit, forever)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if done.done():  # the caller gave up (cancelled): nobody wants the answer
            return
        if error is None:
            done.set_result(value)
        else:
            done.set_exception(error)

    def target() -> None:
        value, error = None, None
        try:
            value = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task, which raises it
            error = exc
        with contextlib.suppress(RuntimeError):  # the event loop has closed: the run ended without this answer
            loop.call_soon_threadsafe(settle, value, error)

    threading.Thread(target=target, name="agentgrad-user-call", daemon=True).start()
    return await done


def _describe(exc: BaseException) -> str:
    """`Type: message`, at most 500 characters, safe to store (lone surrogates escaped)."""
    text = f"{type(exc).__name__}: {exc}"[:500]
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


class Caller:
    """Runs user functions with a thread bound and a timeout; `clock` is the injected time port.

    State: `limiter`, the async admission queue for synchronous calls (at most `threads` dispatched at once; the
    wait for it is not part of the timeout), and `busy`, the threads inside user functions (held by each thread
    until its function really returns, so a hung call that timed out keeps its place).
    """

    def __init__(self, *, threads: int, timeout: float, clock: Callable[[], float],
                 inline_reward: bool = True) -> None:
        self.reward_path = FastPath(enabled=inline_reward)
        self.limiter = anyio.CapacityLimiter(max(1, threads))
        self.busy = ThreadBound(threads)
        self.timeout = timeout
        self.clock = clock

    async def invoke(self, fn: Callable[..., Any], args: tuple[Any, ...], running: ThreadBound | None = None,
                     patience: float | None = None) -> Any:
        """Call `fn(*args)` (awaiting it, or in the thread pool) under the timeout; exceptions propagate.

        Waiting for the admission queue is not part of the timeout. A timed-out synchronous call is abandoned: its
        thread finishes on its own and keeps its place in `busy` (and, with `running`, its slot) until then; a
        call that meanwhile finds no place waits within its own timeout and, if that runs out, never starts. With
        a `patience` shorter than the timeout, a call still running then is cut off the same way and `Straggler`
        is raised instead of `TimeoutError` (one cancel scope either way: it costs nothing more).
        """
        limit = self.timeout if patience is None else min(self.timeout, patience)
        try:
            return await self._invoke(fn, args, running, limit)
        except TimeoutError:
            if limit < self.timeout:
                raise Straggler(limit) from None
            raise

    async def _invoke(self, fn: Callable[..., Any], args: tuple[Any, ...], running: ThreadBound | None,
                      limit: float) -> Any:
        if inspect.iscoroutinefunction(fn):
            with anyio.fail_after(limit):
                return await fn(*args)
        abandoned = threading.Event()
        bounds = (self.busy,) if running is None else (running, self.busy)
        async with self.limiter:
            try:
                with anyio.fail_after(limit):
                    value = await in_daemon_thread(_guarded, fn, args, bounds, abandoned)
                    if inspect.isawaitable(value):
                        value = await value
                    return value
            except BaseException:
                abandoned.set()
                for bound in bounds:
                    bound.wake()
                raise

    async def call(self, fn: Callable[..., Any], *args: Any, slots: Slots | None = None, priority: int = 0,
                   late: Callable[[], tuple[Any, ...]] | None = None, patience: float | None = None) -> CallOutcome:
        """Call `fn(*args)`; exceptions and timeouts become an outcome with an error, never a raise.

        With `slots`, the call first waits for a free slot (that wait is not part of the timeout); waiting calls
        get slots in order of `priority` (lower first), then of arrival. With `late`, the arguments are made by
        `late()` once the slot is granted (so they can be as fresh as possible), and `args` is ignored. A call
        cut off at its `patience` is an outcome with `straggler` set.
        """
        if slots is None:
            return await self._call(fn, late() if late is not None else args, None, patience)
        async with slots.queue.hold(priority):
            return await self._call(fn, late() if late is not None else args, slots.running, patience)

    async def _call(self, fn: Callable[..., Any], args: tuple[Any, ...], running: ThreadBound | None,
                    patience: float | None) -> CallOutcome:
        start = self.clock()
        try:
            value = await self.invoke(fn, args, running, patience)
        except Straggler as exc:
            return CallOutcome(None, str(exc), self.clock() - start, straggler=True)
        except TimeoutError:
            return CallOutcome(None, f"timed out after {self.timeout:g} s", self.clock() - start)
        except SystemicError:  # a rejected key or a missing model: no example's evidence; the run stops
            raise
        except Exception as exc:  # noqa: BLE001 - a user function's failure is this example's evidence
            return CallOutcome(None, _describe(exc), self.clock() - start)
        seconds = self.clock() - start
        try:
            usage = usage_of(value)
        except ValueError as exc:
            return CallOutcome(None, f"the call reported invalid usage: {exc}", seconds)
        return CallOutcome(value, None, seconds, usage)

    async def run(self, fn: Callable[..., Any], rendered: str, task: Any, *, slots: Slots | None = None,
                  priority: int = 0, late: Callable[[], tuple[Any, ...]] | None = None,
                  patience: float | None = None) -> CallOutcome:
        """Call `run` and check that it returned text (a string, or an object with a `.text` string); `late`
        and `patience` as in `call`."""
        outcome = await self.call(fn, rendered, task, slots=slots, priority=priority, late=late, patience=patience)
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

    async def _reward_value(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        """A plain reward runs in a thread, or on the event loop once it proved fast (`FastPath`)."""
        path = self.reward_path
        if inspect.iscoroutinefunction(fn) or path.mode == THREADS:
            return await self.invoke(fn, args)
        if path.inline:
            value, seconds = timed(fn, args, self.clock)
        else:
            value, seconds = await self.invoke(timed, (fn, args, self.clock))
        path.observe(seconds)
        return value

    async def reward(self, fn: Callable[..., Any], task: Any, task_id: str, output: str) -> float:
        """Call `reward`; anything but a finite number in [0, 1] (or a raise, or a timeout) is a `RewardError`."""
        try:
            value: Any = await self._reward_value(fn, (task, output))
            if isinstance(value, Awaitable):
                value = await value
        except TimeoutError as exc:
            raise RewardError(f"reward timed out after {self.timeout:g} s on task {task_id!r}") from exc
        except Exception as exc:
            raise RewardError(f"reward raised on task {task_id!r}: {_describe(exc)}") from exc
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise RewardError(f"reward returned {type(value).__name__} on task {task_id!r}, expected a float in [0, 1]")
        try:
            score = float(value)
        except OverflowError:
            score = math.inf
        if math.isnan(score) or not 0.0 <= score <= 1.0:
            raise RewardError(f"reward returned {score!r} on task {task_id!r}, outside [0, 1]")
        return score
