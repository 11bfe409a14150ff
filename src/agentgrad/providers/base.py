"""The provider vocabulary: `Message`, `Usage`, `Completion` and the `Provider` protocol.

A provider turns a conversation into one completion. Every provider and every middleware layer speaks this one
async protocol; `agentgrad.providers.sync.complete_sync` is the blocking façade.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from agentgrad.core._checks import integer, number, text
from agentgrad.providers.errors import InvalidMessageError

ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class Message:
    """One turn of a conversation: `role` is system, developer, user, assistant or tool; `content` is text."""

    role: str
    content: str

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise InvalidMessageError(f"message role must be one of {sorted(ROLES)}, got {self.role!r}")
        text(self.content, "message content", empty=True, error=InvalidMessageError)


@dataclass(frozen=True)
class Usage:
    """Tokens as the provider reported them, and the cost in USD (0.0 until `Accounting` prices it)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0

    def __post_init__(self) -> None:
        for name in ("input_tokens", "output_tokens"):
            integer(getattr(self, name), f"Usage.{name}", low=0, error=InvalidMessageError)
        number(self.cost, "Usage.cost", low=0, error=InvalidMessageError)


@dataclass(frozen=True)
class Completion:
    """What a provider returns.

    Args:
        text: the generated text (lone surrogates already replaced, see `clean_text`).
        usage: tokens and cost of this call.
        latency: wall seconds the call took.
        model: the model that answered, as the provider reported it.
        finish_reason: why generation stopped ("stop", "length", "end_turn", ...), None if not reported.
        cached: True when the answer came from `Cache` and cost nothing.
    """

    text: str
    usage: Usage
    latency: float
    model: str
    finish_reason: str | None = None
    cached: bool = False


@runtime_checkable
class Provider(Protocol):
    """Anything that completes a conversation. `name` identifies the endpoint (it is part of cache keys)."""

    name: str

    async def complete(self, messages: Sequence[Message], **params: Any) -> Completion:
        """One completion. Params: model, temperature, max_tokens, stop, timeout and provider-specific extras."""
        ...


MessageLike = Message | Mapping[str, Any]


def as_messages(messages: str | Sequence[MessageLike]) -> tuple[Message, ...]:
    """Normalise a conversation: `Message`s, dicts with "role" and "content", or one string (a user turn).

    Raises `InvalidMessageError` saying which item is wrong.
    """
    if isinstance(messages, str):
        return (Message("user", messages),)
    if not isinstance(messages, Sequence) or not messages:
        raise InvalidMessageError(f"messages must be a non-empty sequence, got {messages!r:.80}")
    out: list[Message] = []
    for i, item in enumerate(messages):
        if isinstance(item, Message):
            out.append(item)
        elif isinstance(item, Mapping) and "role" in item and "content" in item:
            try:
                out.append(Message(item["role"], item["content"]))
            except InvalidMessageError as exc:
                raise InvalidMessageError(f"messages[{i}]: {exc}") from None
        else:
            raise InvalidMessageError(f"messages[{i}] must be a Message or a dict with role and content, "
                                      f"got {item!r:.80}")
    return tuple(out)


def clean_text(text: str) -> str:
    """`text` with lone UTF-16 surrogates (which cannot be encoded and kill writers later) replaced by U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text
