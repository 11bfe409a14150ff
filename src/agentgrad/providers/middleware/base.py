"""`Middleware`: the shared shell of every layer (it holds the inner provider and answers to its name)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TypeVar

from agentgrad.providers.base import Provider

P = TypeVar("P", bound=Provider)


class Middleware:
    """A provider that wraps another. `name` is the inner provider's name, so cache keys ignore the layering."""

    def __init__(self, inner: Provider) -> None:
        self.inner = inner
        self.name = inner.name

    async def aclose(self) -> None:
        """Release what this layer holds, then close the inner provider if it can be closed."""
        close = getattr(self.inner, "aclose", None)
        if callable(close):
            await close()


def layers(provider: Provider) -> Iterator[Provider]:
    """`provider`, then each provider it wraps, down to the innermost one."""
    current: Provider | None = provider
    while current is not None:
        yield current
        current = current.inner if isinstance(current, Middleware) else None


def wrap(provider: Provider, *wrappers: Callable[[Provider], Provider]) -> Provider:
    """Apply `wrappers` inside-out: the first wraps `provider`, the last is outermost.

    >>> stack = wrap(p, lambda p: ConcurrencyLimit(p, 16), lambda p: Retry(p))  # Retry outside the limit
    """
    for layer in wrappers:
        provider = layer(provider)
    return provider
