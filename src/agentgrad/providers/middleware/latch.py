"""`FatalLatch`: the first call goes alone, and an answer no retry can change stops every later call at once; so does
an endpoint that never answers the first call."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio

from agentgrad.errors import ConfigError
from agentgrad.providers.base import Completion, Message, Provider
from agentgrad.providers.errors import AuthError, NotFoundError, ProviderError, SilentEndpointError
from agentgrad.providers.middleware.base import Middleware, layers

FATAL = (AuthError, NotFoundError)  # a bad or missing key, an unknown model or base URL
FIRST_ANSWER_WITHIN = 30.0  # seconds the first call may wait for an answer (retries included) before it is silent


class FatalLatch(Middleware):
    """Until an answer has come back from the endpoint, calls go one at a time (each a probe); once one has, they
    go through freely. A fatal error (`AuthError`, `NotFoundError`) latches: every later call raises it again at
    once, with no request. So an endpoint that answers 401 sees one request, however many slots were waiting,
    instead of one per slot (and the run stops on the first).

    A permanent error that is not fatal (400, say) is an answer from a live endpoint, so it ends the probing; a
    transient one (timeout, 5xx, 429) does not, and the next waiting call probes.

    An endpoint that gives nothing back to the first probe within `first_answer_within` seconds (retries
    included) is silent: `SilentEndpointError` latches, and the run stops, within about that bound, after one
    request (a server that accepts connections and never answers would otherwise hold every slot for the full
    timeout times the retries). None turns it off. After a first answer, slow calls are ordinary timeouts.

    State: whether the endpoint has answered, the latched error, and the lock the probes take.
    """

    def __init__(self, inner: Provider, *, first_answer_within: float | None = FIRST_ANSWER_WITHIN) -> None:
        super().__init__(inner)
        if first_answer_within is not None and not first_answer_within > 0:
            raise ConfigError(f"FatalLatch first_answer_within must be None or > 0, got {first_answer_within!r}")
        self.first_answer_within = first_answer_within
        self.answered = False
        self.latched: ProviderError | None = None
        self._lock: anyio.Lock | None = None

    async def complete(self, messages: Sequence[Message], **params: Any) -> Completion:
        if not self.answered and self.latched is None:
            if self._lock is None:
                self._lock = anyio.Lock()
            async with self._lock:
                self._refuse()
                if not self.answered:
                    return await self._probe(messages, **params)
        self._refuse()
        return await self._call(messages, **params)

    def _refuse(self) -> None:
        error = self.latched
        if error is not None:
            raise type(error)(f"{error.message} (an earlier call got this; no request sent)", provider=error.provider,
                              path=error.path, status=error.status, excerpt=error.excerpt)

    async def _probe(self, messages: Sequence[Message], **params: Any) -> Completion:
        """A call before the endpoint ever answered, bounded by `first_answer_within`."""
        if self.first_answer_within is None:
            return await self._call(messages, **params)
        with anyio.move_on_after(self.first_answer_within) as scope:
            return await self._call(messages, **params)
        if scope.cancelled_caught:
            where = " ".join(str(getattr(layer, attr)) for layer in layers(self.inner)
                             for attr in ("name", "base_url") if isinstance(getattr(layer, attr, None), str))
            self.latched = SilentEndpointError(
                f"no answer to the first call within {self.first_answer_within:g} s: the endpoint accepts the "
                "connection but stays silent, or the address is wrong; check the base URL and that the server "
                "is up (FatalLatch(first_answer_within=...) sets the bound)", provider=where)
            raise self.latched
        raise AssertionError("unreachable")  # pragma: no cover

    async def _call(self, messages: Sequence[Message], **params: Any) -> Completion:
        try:
            result = await self.inner.complete(messages, **params)
        except FATAL as err:
            self.latched = err
            raise
        except ProviderError as err:
            self.answered = self.answered or not err.transient
            raise
        self.answered = True
        return result


__all__ = ["FATAL", "FIRST_ANSWER_WITHIN", "FatalLatch"]
