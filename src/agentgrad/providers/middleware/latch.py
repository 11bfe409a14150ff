"""`FatalLatch`: the first call goes alone, and an answer no retry can change stops every later call at once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio

from agentgrad.providers.base import Completion, Message, Provider
from agentgrad.providers.errors import AuthError, NotFoundError, ProviderError
from agentgrad.providers.middleware.base import Middleware

FATAL = (AuthError, NotFoundError)  # a bad or missing key, an unknown model or base URL


class FatalLatch(Middleware):
    """Until an answer has come back from the endpoint, calls go one at a time (each a probe); once one has, they
    go through freely. A fatal error (`AuthError`, `NotFoundError`) latches: every later call raises it again at
    once, with no request. So an endpoint that answers 401 sees one request, however many slots were waiting,
    instead of one per slot (and the run stops on the first).

    A permanent error that is not fatal (400, say) is an answer from a live endpoint, so it ends the probing; a
    transient one (timeout, 5xx, 429) does not, and the next waiting call probes.

    State: whether the endpoint has answered, the latched error, and the lock the probes take.
    """

    def __init__(self, inner: Provider) -> None:
        super().__init__(inner)
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
                    return await self._call(messages, **params)
        self._refuse()
        return await self._call(messages, **params)

    def _refuse(self) -> None:
        error = self.latched
        if error is not None:
            raise type(error)(f"{error.message} (an earlier call got this; no request sent)", provider=error.provider,
                              path=error.path, status=error.status, excerpt=error.excerpt)

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


__all__ = ["FATAL", "FatalLatch"]
