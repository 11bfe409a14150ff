"""`Retry`: one retry budget per call. Permanent errors fail fast; only `ProviderError`s marked transient retry.

Use exactly one `Retry` per stack and let nothing above it retry again: nested retries multiply (4 x 4 x 4
requests per call), which is how a peer hit a 401 endpoint 192 times in 27 s. Nesting is refused here.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from agentgrad.errors import ConfigError
from agentgrad.providers.base import Completion, Message, Provider
from agentgrad.providers.errors import CircuitOpen, MalformedResponse, ProviderError, RateLimitError
from agentgrad.providers.middleware.base import Middleware, layers

Sleep = Callable[[float], Awaitable[object]]


class Retry(Middleware):
    """Retries transient failures with capped exponential backoff and jitter.

    Args:
        inner: the provider.
        attempts: requests per call at most (1 = no retry).
        base, cap: the n-th retry waits about min(cap, base * 2**n) seconds.
        jitter: the fraction of that wait drawn at random (0 = none, 1 = anywhere in [0, wait]).
        malformed_attempts: requests per call at most while answers are malformed (a server that sends broken
            JSON usually keeps doing so).
        sleep: the async sleep (tests pass a fake that records the waits).
        rng: the random source of the jitter (default: seeded, so runs are reproducible).
    State: counters of calls, retries and failures by kind (`stats()`).

    A 429 waits its `Retry-After` (capped at `cap`) exactly, without jitter. `CircuitOpen` is not retried.
    The error finally raised carries `attempts`, the number of requests the call made.
    """

    def __init__(self, inner: Provider, *, attempts: int = 4, base: float = 0.5, cap: float = 30.0,
                 jitter: float = 0.5, malformed_attempts: int = 2, sleep: Sleep = asyncio.sleep,
                 rng: random.Random | None = None) -> None:
        if attempts < 1 or malformed_attempts < 1 or base < 0 or cap < 0 or not 0 <= jitter <= 1:
            raise ConfigError(f"Retry needs attempts >= 1, malformed_attempts >= 1, base >= 0, cap >= 0 and "
                              f"0 <= jitter <= 1; got {attempts}, {malformed_attempts}, {base}, {cap}, {jitter}")
        if any(isinstance(p, Retry) for p in layers(inner)):
            raise ConfigError("Retry wraps a provider that already retries: nested retries multiply requests; "
                              "keep exactly one Retry per stack")
        super().__init__(inner)
        self.attempts = attempts
        self.base, self.cap, self.jitter = float(base), float(cap), float(jitter)
        self.malformed_attempts = malformed_attempts
        self._sleep = sleep
        self._rng = rng if rng is not None else random.Random(0)
        self._counts: Counter[str] = Counter()

    async def complete(self, messages: Sequence[Message], **params: Any) -> Completion:
        """Call the inner provider until it answers, fails permanently or the budget is spent."""
        self._counts["calls"] += 1
        malformed = 0
        for attempt in range(1, self.attempts + 1):
            try:
                return await self.inner.complete(messages, **params)
            except ProviderError as err:
                self._counts[f"failed_{err.kind}"] += 1
                malformed += isinstance(err, MalformedResponse)
                if not self._should_retry(err, attempt, malformed):
                    err.attempts = attempt
                    self._counts["gave_up"] += 1
                    raise
                self._counts["retries"] += 1
                await self._sleep(self.delay(err, attempt - 1))
        raise AssertionError("unreachable: the last attempt either returns or raises")

    def _should_retry(self, err: ProviderError, attempt: int, malformed: int) -> bool:
        if not err.transient or isinstance(err, CircuitOpen) or attempt >= self.attempts:
            return False
        return malformed < self.malformed_attempts

    def delay(self, err: ProviderError, retry: int) -> float:
        """Seconds to wait before retry number `retry` (0-based) after `err`."""
        if isinstance(err, RateLimitError) and err.retry_after is not None:
            return min(err.retry_after, self.cap)
        wait = min(self.cap, self.base * 2.0 ** retry)
        return wait * (1.0 - self.jitter + self.jitter * self._rng.random())

    def stats(self) -> dict[str, int]:
        """Counters: calls, retries, gave_up and failed_<kind> for each failure kind seen."""
        return dict(self._counts)
