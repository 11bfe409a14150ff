"""`Anthropic`: the Messages API through the official `anthropic` SDK (an optional dependency, imported lazily).

The SDK's own retries are off (`max_retries=0`): `Retry` owns retries. SDK exceptions become taxonomy errors.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agentgrad.errors import ConfigError
from agentgrad.providers._loop import LoopScoped
from agentgrad.providers.base import Completion, Message, Usage, clean_text
from agentgrad.providers.errors import (
    ConnectionLost,
    InvalidMessageError,
    MalformedResponse,
    ProviderError,
    ProviderTimeout,
    error_for_status,
    excerpt,
    parse_retry_after,
)

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

PATH = "/v1/messages"
_SYSTEM_ROLES = frozenset({"system", "developer"})
# API version 2026-10-21 (the SDK 2.x default) answers 400 to any sampling parameter, even at its default value.
SAMPLING = frozenset({"temperature", "top_p", "top_k"})
_HANDLED = frozenset({"model", "max_tokens", "stop", "timeout", "stream", "messages", "system"}) | SAMPLING


class Anthropic:
    """Claude models through the Messages API.

    Args:
        api_key: the key (None: the SDK reads ANTHROPIC_API_KEY).
        model: the default model; a call may pass `model=...`.
        base_url: another endpoint speaking the same wire format (a proxy, a test server).
        timeout: default seconds for a whole call.
        max_tokens: default `max_tokens` (the API requires one).
        name: the provider's name (in errors and cache keys); default "anthropic:{model}[@{base_url}]".
    State: one SDK client per event loop.

    System (and developer) messages are joined into the top-level `system` field; `stop` becomes
    `stop_sequences`. temperature, top_p and top_k are left out: the API version the SDK 2.x sends
    (2026-10-21) rejects them with a 400 even at default values, so generic callers may still pass them.
    Other params must be keyword arguments of the SDK's `messages.create` (metadata, thinking, tools, ...).
    Input tokens count cache writes and reads too, at the input price (an upper bound on cost).
    """

    def __init__(self, *, api_key: str | None = None, model: str, base_url: str | None = None,
                 timeout: float = 120.0, max_tokens: int = 4096, name: str | None = None) -> None:
        try:
            import anthropic as sdk
        except ImportError as exc:
            raise ConfigError("the Anthropic provider needs the SDK: pip install 'agentgrad[anthropic]'") from exc
        if not model or timeout <= 0 or max_tokens < 1:
            raise ConfigError(f"Anthropic needs a model, timeout > 0 and max_tokens >= 1; got {model!r}, "
                              f"{timeout!r}, {max_tokens!r}")
        self._sdk = sdk
        self.model = model
        self.timeout = float(timeout)
        self.max_tokens = max_tokens
        self.name = name or f"anthropic:{model}" + (f"@{base_url.rstrip('/')}" if base_url else "")

        def make() -> AsyncAnthropic:
            return sdk.AsyncAnthropic(api_key=api_key, base_url=base_url, max_retries=0, timeout=self.timeout)

        self._clients: LoopScoped[AsyncAnthropic] = LoopScoped(make, lambda c: c.close())
        create = sdk.resources.messages.AsyncMessages.create
        self._accepted = frozenset(inspect.signature(create).parameters) - _HANDLED - {"self"}

    async def complete(self, messages: Sequence[Message], **params: Any) -> Completion:
        """One Messages API call; raises a `ProviderError` subclass on any failure."""
        request = self._request(messages, params)
        timeout = float(params.get("timeout") or self.timeout)
        client = await self._clients.get()
        start = time.perf_counter()
        try:
            reply = await asyncio.wait_for(client.messages.create(**request, timeout=timeout), timeout)
        except asyncio.TimeoutError:
            raise ProviderTimeout(f"no complete answer within {timeout:g}s", provider=self.name, path=PATH) from None
        except (self._sdk.AnthropicError, json.JSONDecodeError) as exc:
            raise self._error(exc) from exc
        text, usage, model, finish = self._parse(reply.model_dump())
        return Completion(clean_text(text), usage, time.perf_counter() - start, model or request["model"], finish)

    async def aclose(self) -> None:
        """Close the SDK client of the running loop."""
        await self._clients.aclose()

    async def __aenter__(self) -> Anthropic:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _request(self, messages: Sequence[Message], params: dict[str, Any]) -> dict[str, Any]:
        system = "\n\n".join(m.content for m in messages if m.role in _SYSTEM_ROLES)
        turns = []
        for i, m in enumerate(messages):
            if m.role in ("user", "assistant"):
                turns.append({"role": m.role, "content": m.content})
            elif m.role not in _SYSTEM_ROLES:
                raise InvalidMessageError(f"{self.name}: messages[{i}] has role {m.role!r}, which the Messages "
                                          "API does not take as plain text")
        if not turns:
            raise InvalidMessageError(f"{self.name}: the Messages API needs at least one user message")
        request: dict[str, Any] = {"model": params.get("model") or self.model, "messages": turns,
                                   "max_tokens": params.get("max_tokens") or self.max_tokens}
        if system:
            request["system"] = system
        if params.get("stop") is not None:
            stop = params["stop"]
            request["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
        extra = {k: v for k, v in params.items() if k not in _HANDLED and v is not None}
        unknown = sorted(set(extra) - self._accepted)
        if unknown:
            raise ConfigError(f"{self.name}: the Messages API (SDK {self._sdk.__version__}) takes no {unknown}; "
                              f"it takes {sorted(self._accepted)}")
        request.update(extra)
        return request

    def _parse(self, data: dict[str, Any]) -> tuple[str, Usage, str, str | None]:
        content, raw_usage = data.get("content"), data.get("usage")
        if not isinstance(content, list) or not isinstance(raw_usage, dict):
            raise MalformedResponse("answer has no content list or no usage", provider=self.name, path=PATH,
                                    status=200, excerpt=excerpt(json.dumps(data, default=str)))
        text = "".join(b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text"
                       and isinstance(b.get("text"), str))
        counts = [raw_usage.get(k) or 0 for k in ("input_tokens", "cache_creation_input_tokens",
                                                   "cache_read_input_tokens", "output_tokens")]
        if not all(isinstance(c, int) and c >= 0 for c in counts) or raw_usage.get("input_tokens") is None:
            raise MalformedResponse("answer has no valid usage", provider=self.name, path=PATH, status=200,
                                    excerpt=excerpt(json.dumps(raw_usage, default=str)))
        finish, model = data.get("stop_reason"), data.get("model")
        return (text, Usage(sum(counts[:3]), counts[3]), model if isinstance(model, str) else "",
                finish if isinstance(finish, str) else None)

    def _error(self, exc: Exception) -> ProviderError:
        sdk = self._sdk
        if isinstance(exc, sdk.APIStatusError):
            retry_after = parse_retry_after(exc.response.headers.get("retry-after"))
            return error_for_status(exc.status_code, exc.response.text, provider=self.name, path=PATH,
                                    retry_after=retry_after)
        if isinstance(exc, sdk.APITimeoutError):
            return ProviderTimeout("the SDK timed out", provider=self.name, path=PATH)
        if isinstance(exc, sdk.APIConnectionError):
            cause = type(exc.__cause__).__name__ if exc.__cause__ else "no cause"
            return ConnectionLost(f"connection error ({cause})", provider=self.name, path=PATH)
        return MalformedResponse(f"{type(exc).__name__}: {exc}", provider=self.name, path=PATH, status=200)
