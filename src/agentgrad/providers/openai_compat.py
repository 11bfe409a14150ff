"""`OpenAICompatible`: chat completions over HTTP for OpenAI, DeepSeek, vLLM, llama.cpp server, Ollama and friends.

No retries here: errors are mapped to the taxonomy in `agentgrad.providers.errors` and raised; `Retry` decides.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx

from agentgrad.core._checks import is_integer
from agentgrad.errors import ConfigError
from agentgrad.providers._loop import LoopScoped
from agentgrad.providers._shards import ClientShards
from agentgrad.providers.base import Completion, Message, Usage, clean_text
from agentgrad.providers.errors import (
    BadRequestError,
    ConnectionLost,
    MalformedResponse,
    ProviderError,
    ProviderTimeout,
    ServerError,
    api_message,
    error_for_status,
    excerpt,
    parse_retry_after,
)

_TRANSPORT_ONLY = frozenset({"model", "timeout", "stream"})


class OpenAICompatible:
    """A chat-completions endpoint.

    Args:
        base_url: the API root, e.g. "http://127.0.0.1:8000/v1" (requests go to `{base_url}/chat/completions`).
        api_key: sent as `Authorization: Bearer ...` when given.
        model: the default model; a call may pass `model=...`.
        timeout: default seconds for a whole call (a call may pass `timeout=...`).
        connect_timeout: seconds to wait for a connection (apart from the answer): an address nothing listens
            on, or a firewall that drops packets, fails within it.
        client: an `httpx.AsyncClient` to use (you close it); by default one pooled client per event loop.
        name: the provider's name (in errors and cache keys); default "openai:{model}@{base_url}".
        stream: stream by default (SSE); a call may pass `stream=True/False`.
        require_usage: a reply without token usage is a `MalformedResponse` (set False for servers that never
            report it; such calls then count zero tokens).
        max_connections: connections at most, over all the small pools made here.
        shard_size: connections per pool (see `ClientShards`: httpx slows down with big pools).
        headers: extra headers for every request.
    State: the pooled HTTP clients of the current event loop.

    Other call params (temperature, max_tokens, stop, top_p, seed, ...) go into the request body as given;
    params set to None are left out.
    """

    def __init__(self, base_url: str, *, api_key: str | None = None, model: str, timeout: float = 60.0,
                 client: httpx.AsyncClient | None = None, name: str | None = None, stream: bool = False,
                 require_usage: bool = True, max_connections: int = 256, shard_size: int = 4,
                 headers: Mapping[str, str] | None = None, connect_timeout: float = 10.0) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(f"OpenAICompatible base_url must be an http(s) URL, got {base_url!r}")
        if not model:
            raise ConfigError("OpenAICompatible needs a default model name")
        if timeout <= 0 or not connect_timeout > 0 or max_connections < 1 or shard_size < 1:
            raise ConfigError(f"OpenAICompatible needs timeout > 0, connect_timeout > 0, max_connections >= 1 and "
                              f"shard_size >= 1, got {timeout!r}, {connect_timeout!r}, {max_connections!r}, "
                              f"{shard_size!r}")
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + "/chat/completions"
        self.path = urlsplit(self.url).path
        self.model = model
        self.timeout = float(timeout)
        self.connect_timeout = min(float(connect_timeout), self.timeout)
        self.name = name or f"openai:{model}@{self.base_url}"
        self.stream = stream
        self.require_usage = require_usage
        self._headers = {"Content-Type": "application/json", **(headers or {})}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._given = client

        def shards() -> ClientShards:
            tls = httpx.create_ssl_context()  # one for all shards: loading the CA store takes ~20 ms

            def make(limits: httpx.Limits) -> httpx.AsyncClient:
                timeouts = httpx.Timeout(self.timeout, connect=self.connect_timeout)  # an address that never
                return httpx.AsyncClient(limits=limits, timeout=timeouts, verify=tls)   # accepts fails in 10 s

            return ClientShards(make, max_connections, shard_size)

        self._shards: LoopScoped[ClientShards] = LoopScoped(shards, lambda s: s.aclose())

    async def complete(self, messages: Sequence[Message], **params: Any) -> Completion:
        """One chat completion; raises a `ProviderError` subclass on any failure."""
        model = str(params.get("model") or self.model)
        timeout = float(params.get("timeout") or self.timeout)
        stream = bool(params.get("stream", self.stream))
        body: dict[str, Any] = {"model": model, "messages": [{"role": m.role, "content": m.content} for m in messages]}
        body.update({k: v for k, v in params.items() if k not in _TRANSPORT_ONLY and v is not None})
        if stream:
            body["stream"] = True
            body.setdefault("stream_options", {"include_usage": True})
        start = time.perf_counter()
        try:
            text, usage, answered_by, finish = await asyncio.wait_for(self._send(body, stream, timeout), timeout)
        except asyncio.TimeoutError:
            raise ProviderTimeout(f"no complete answer within {timeout:g}s", provider=self.name,
                                  path=self.path) from None
        return Completion(clean_text(text), usage, time.perf_counter() - start, answered_by or model, finish)

    async def aclose(self) -> None:
        """Close the HTTP clients made for the running loop (a client passed in is yours to close)."""
        await self._shards.aclose()

    async def __aenter__(self) -> OpenAICompatible:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _send(self, body: dict[str, Any], stream: bool, timeout: float) -> tuple[str, Usage, str, str | None]:
        if self._given is not None:
            client = self._given
            return await (self._streamed(client, body, timeout) if stream else self._single(client, body, timeout))
        shards = await self._shards.get()
        async with shards.client() as client:
            return await (self._streamed(client, body, timeout) if stream else self._single(client, body, timeout))

    async def _single(self, client: httpx.AsyncClient, body: dict[str, Any],
                      timeout: float) -> tuple[str, Usage, str, str | None]:
        try:
            resp = await client.post(self.url, json=body, headers=self._headers, timeout=timeout)
        except httpx.HTTPError as exc:
            raise self._transport_error(exc) from exc
        if resp.status_code >= 400:
            raise self._status_error(resp, resp.content)
        return self._parse_body(resp.content)

    def _parse_body(self, raw: bytes) -> tuple[str, Usage, str, str | None]:
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise self._malformed("answer is not JSON", raw) from None
        return self._parse_reply(data, raw)

    async def _streamed(self, client: httpx.AsyncClient, body: dict[str, Any],
                        timeout: float) -> tuple[str, Usage, str, str | None]:
        try:
            async with client.stream("POST", self.url, json=body, headers=self._headers, timeout=timeout) as resp:
                if resp.status_code >= 400:
                    raise self._status_error(resp, await resp.aread())
                if not resp.headers.get("content-type", "").startswith("text/event-stream"):
                    return self._parse_body(await resp.aread())  # the server ignored stream=true
                return await self._read_events(resp)
        except httpx.HTTPError as exc:
            raise self._transport_error(exc) from exc

    async def _read_events(self, resp: httpx.Response) -> tuple[str, Usage, str, str | None]:
        acc = _StreamAccumulator()
        async for line in resp.aiter_lines():
            if not line.startswith("data:"):
                continue
            payload = line[5:].strip()
            if payload == "[DONE]":
                return self._finish_stream(acc)
            try:
                chunk = json.loads(payload)
            except ValueError:
                raise self._malformed("stream event is not JSON", payload) from None
            if not isinstance(chunk, dict):
                raise self._malformed("stream event is not an object", payload)
            if "error" in chunk:
                raise ServerError(f"error event in stream: {api_message(payload) or 'unknown'}",
                                  provider=self.name, path=self.path, status=resp.status_code,
                                  excerpt=excerpt(payload))
            if not acc.feed(chunk):
                raise self._malformed("stream event has no choices or usage", payload)
        raise ConnectionLost("stream ended before [DONE]", provider=self.name, path=self.path,
                             status=resp.status_code, excerpt=excerpt("".join(acc.parts)))

    def _finish_stream(self, acc: _StreamAccumulator) -> tuple[str, Usage, str, str | None]:
        if acc.usage is None and self.require_usage:
            raise self._malformed("stream reported no usage (server ignores stream_options?)", "")
        return "".join(acc.parts), acc.usage or Usage(), acc.model, acc.finish

    def _parse_reply(self, data: Any, raw: bytes) -> tuple[str, Usage, str, str | None]:
        choices = data.get("choices") if isinstance(data, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise self._malformed("answer has no choices", raw)
        message = choices[0].get("message")
        content = message.get("content", None) if isinstance(message, dict) else None
        if not isinstance(message, dict) or not isinstance(content, (str, type(None))):
            raise self._malformed("choices[0].message.content is missing or not text", raw)
        usage = _usage(data.get("usage"))
        if usage is None and (self.require_usage or data.get("usage") is not None):
            raise self._malformed("answer has no valid usage", raw)
        finish = choices[0].get("finish_reason")
        model = data.get("model")
        return (content or "", usage or Usage(), model if isinstance(model, str) else "",
                finish if isinstance(finish, str) else None)

    def _status_error(self, resp: httpx.Response, raw: bytes) -> ProviderError:
        retry_after = parse_retry_after(resp.headers.get("retry-after"))
        return error_for_status(resp.status_code, raw, provider=self.name, path=self.path, retry_after=retry_after)

    def _malformed(self, what: str, raw: str | bytes) -> MalformedResponse:
        return MalformedResponse(what, provider=self.name, path=self.path, status=200, excerpt=excerpt(raw))

    def _transport_error(self, exc: httpx.HTTPError) -> ProviderError:
        detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        cls: type[ProviderError] = BadRequestError  # misuse: bad URL scheme, local protocol error, redirects
        if isinstance(exc, httpx.TimeoutException):
            cls = ProviderTimeout
        elif isinstance(exc, (httpx.NetworkError, httpx.RemoteProtocolError, httpx.ProxyError)):
            cls = ConnectionLost
        elif isinstance(exc, httpx.DecodingError):
            cls = MalformedResponse
        return cls(detail, provider=self.name, path=self.path)


class _StreamAccumulator:
    """Collects the text, finish reason, model and usage of a chat-completions SSE stream."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.finish: str | None = None
        self.model = ""
        self.usage: Usage | None = None

    def feed(self, chunk: dict[str, Any]) -> bool:
        """Take one event; False if it holds neither choices nor usage."""
        if isinstance(chunk.get("model"), str):
            self.model = chunk["model"]
        usage = _usage(chunk.get("usage"))
        if usage is not None:
            self.usage = usage
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            return usage is not None
        for choice in choices:
            delta = choice.get("delta") if isinstance(choice, dict) else None
            if isinstance(delta, dict) and isinstance(delta.get("content"), str):
                self.parts.append(delta["content"])
            if isinstance(choice, dict) and isinstance(choice.get("finish_reason"), str):
                self.finish = choice["finish_reason"]
        return True


def _usage(raw: Any) -> Usage | None:
    """`Usage` from an OpenAI usage object, exactly as reported; None when absent or not integers."""
    if not isinstance(raw, dict):
        return None
    prompt, completion = raw.get("prompt_tokens"), raw.get("completion_tokens")
    if not (is_integer(prompt, low=0) and is_integer(completion, low=0)):
        return None
    return Usage(prompt, completion)

