"""`CircuitBreaker`: stop sending to an endpoint that keeps failing, and probe it again later."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from agentgrad.errors import ConfigError
from agentgrad.providers.base import Completion, Message, Provider
from agentgrad.providers.errors import CircuitOpen, ProviderError
from agentgrad.providers.middleware.base import Middleware


class CircuitBreaker(Middleware):
    """Opens after `failures` consecutive transient failures; while open, calls fail fast with `CircuitOpen`.

    After `reset_after` seconds it half-opens: one trial call goes through (others still fail fast); success
    closes it, a transient failure opens it again. A permanent error (401, 400, ...) is an answer from a live
    server and counts as success here; an exception that is not a `ProviderError` (a bug, a cancellation) says
    nothing about the endpoint and changes no count.

    Args:
        inner: the provider.
        failures: consecutive transient failures that open the circuit.
        reset_after: seconds open before a trial call is let through.
        clock: monotonic seconds (tests pass a fake clock).
        opens_on: the transient failures that count (default: all); others change no count. The named-model
            stack counts silence only (`ProviderTimeout`, `ConnectionLost`), so rate limits never open it.
    State: consecutive failures, when it opened, whether a trial is in flight.
    """

    def __init__(self, inner: Provider, *, failures: int = 5, reset_after: float = 30.0,
                 clock: Callable[[], float] = time.monotonic,
                 opens_on: tuple[type[ProviderError], ...] = (ProviderError,)) -> None:
        if failures < 1 or reset_after < 0:
            raise ConfigError(f"CircuitBreaker needs failures >= 1 and reset_after >= 0, got {failures}, "
                              f"{reset_after}")
        super().__init__(inner)
        self.failures = failures
        self.opens_on = opens_on
        self.reset_after = float(reset_after)
        self._clock = clock
        self._consecutive = 0
        self._opened_at: float | None = None
        self._trial = False

    @property
    def state(self) -> str:
        """"closed", "open" or "half_open" (open, but the reset time has passed or a trial is in flight)."""
        if self._opened_at is None:
            return "closed"
        if self._trial or self._clock() - self._opened_at >= self.reset_after:
            return "half_open"
        return "open"

    async def complete(self, messages: Sequence[Message], **params: Any) -> Completion:
        """Refuse while open; otherwise call through and record the outcome."""
        trial = self._admit()
        verdict: bool | None = None
        try:
            result = await self.inner.complete(messages, **params)
            verdict = True
            return result
        except ProviderError as err:
            if isinstance(err, CircuitOpen) or (err.transient and not isinstance(err, self.opens_on)):
                verdict = None  # says nothing about whether the endpoint is there (a 429 is a live endpoint)
            else:
                verdict = not err.transient
            raise
        finally:
            self._record(verdict, trial)

    def _admit(self) -> bool:
        """True if this call is the half-open trial; raises `CircuitOpen` if the call may not go."""
        if self._opened_at is None:
            return False
        waited = self._clock() - self._opened_at
        if waited >= self.reset_after and not self._trial:
            self._trial = True
            return True
        left = max(self.reset_after - waited, 0.0)
        why = "a trial call is in flight" if self._trial else f"half-opens in {left:.3g}s"
        raise CircuitOpen(f"circuit open after {self._consecutive} consecutive failures; {why}",
                          provider=self.name, retry_after=left)

    def _record(self, ok: bool | None, trial: bool) -> None:
        if trial:
            self._trial = False
        if ok is None:
            return
        if ok:
            self._consecutive, self._opened_at = 0, None
            return
        self._consecutive += 1
        if trial or self._consecutive >= self.failures:
            self._opened_at = self._clock()
