"""`CallableProvider`: a plain or async function as a provider (fakes, local models, glue code)."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from agentgrad.errors import ConfigError
from agentgrad.providers.base import Completion, Message, Usage, clean_text

Fn = Callable[..., "str | Completion | Awaitable[str | Completion]"]


class CallableProvider:
    """Calls `fn(messages, **params)`; it returns text or a `Completion` (or an awaitable of one).

    Args:
        fn: the function. Its exceptions pass through unchanged: only `ProviderError`s are ever retried, so a
            bug in it (a KeyError, a TypeError) fails fast instead of being retried as a transient fault.
        name: the provider's name (part of cache keys).
        model: the model reported when `fn` returns plain text and the call names none.
        in_thread: run a plain (blocking) function in a worker thread so it does not stall the event loop.
    State: none.
    """

    def __init__(self, fn: Fn, *, name: str = "callable", model: str = "callable", in_thread: bool = False) -> None:
        if not callable(fn):
            raise ConfigError(f"CallableProvider needs a callable, got {type(fn).__name__}")
        self.fn = fn
        self.name = name
        self.model = model
        self.in_thread = in_thread

    async def complete(self, messages: Sequence[Message], **params: Any) -> Completion:
        """Call `fn` and wrap a plain-text answer in a `Completion` with zero usage."""
        start = time.perf_counter()
        if self.in_thread and not inspect.iscoroutinefunction(self.fn):
            result = await asyncio.to_thread(self.fn, messages, **params)
        else:
            result = self.fn(messages, **params)
        if inspect.isawaitable(result):
            result = await result
        if isinstance(result, Completion):
            return result
        if not isinstance(result, str):
            raise ConfigError(f"CallableProvider {self.name!r}: fn must return str or Completion, "
                              f"got {type(result).__name__}")
        model = str(params.get("model") or self.model)
        return Completion(clean_text(result), Usage(), time.perf_counter() - start, model, "stop")
