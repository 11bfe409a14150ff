"""`complete_sync`: the blocking façade over any async provider."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from agentgrad.providers.base import Completion, MessageLike, Provider, as_messages
from agentgrad.providers.errors import SyncInLoopError


def complete_sync(provider: Provider, messages: str | Sequence[MessageLike], **params: Any) -> Completion:
    """Run `provider.complete` to the end with `asyncio.run` and return its answer.

    Messages may be `Message`s, dicts with "role" and "content", or one string (a user turn). Raises
    `SyncInLoopError` when called from inside a running event loop (await `provider.complete` there).
    Each call runs its own event loop; for many calls, write one async function and `asyncio.run` it once.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(provider.complete(as_messages(messages), **params))
    raise SyncInLoopError(f"complete_sync({provider.name!r}) was called inside a running event loop; "
                          "use `await provider.complete(...)` there")


async def complete(provider: Provider, messages: str | Sequence[MessageLike], **params: Any) -> Completion:
    """`provider.complete` that also takes dicts or one string as messages (normalised by `as_messages`)."""
    return await provider.complete(as_messages(messages), **params)
