"""A small HTTP/1.1 server for provider tests: OpenAI chat completions (plain and SSE) and Anthropic Messages.

It runs on its own event loop in a background thread, on 127.0.0.1 and a free port. The model name picks the
scenario (see `SCENARIOS`); the server counts requests per model and tracks how many were in flight at once.
Run `python -m tests.providers.fake_server` to serve from a separate process (prints the port, for benchmarks).
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import struct
import sys
import threading
from collections import Counter
from dataclasses import dataclass
from typing import Any

SCENARIOS = """
ok / any other name     200 with "echo: <last user text>" ("[system: ...] " first when there is a system prompt)
err-400 err-401 err-403 err-404 err-500 err-529   that status with the wire format's error JSON
no-such-model           404 like an unknown model
fail-<n>-then-ok        500 for the first n requests of that model, then ok
rate-limit-then-ok      429 with Retry-After: 3 on the first request, then ok
slow-<n>ms, slow-<n>s   ok after that delay
reset-mid-body          headers and part of the body, then a TCP reset
malformed               200 with a body that is not JSON
missing-fields          200 with JSON that has no choices / content
no-usage                ok without the usage object
stream-cut              (streaming) two events, then the connection closes without [DONE]
surrogate               ok whose text holds a lone surrogate escape
"""
_SLOW = re.compile(r"slow-(\d+)(ms|s)$")
_FAIL = re.compile(r"fail-(\d+)-then-ok$")
_STATUS = {"err-400": 400, "err-401": 401, "err-403": 403, "err-404": 404, "no-such-model": 404,
           "err-500": 500, "err-529": 529}
_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
            411: "Length Required", 429: "Too Many Requests", 500: "Internal Server Error", 529: "Overloaded"}


@dataclass(frozen=True)
class Seen:
    """One request as the server received it."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class _Reply(Exception):
    """Raised inside a handler to answer with an error status."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


class FakeServer:
    """The test server. State: per-model request counts, requests seen, in-flight gauge and its maximum.

    The gauge counts only requests that arrived since the last `reset`, so a slow request left over from an
    earlier test does not leak into the next test's measurement.
    """

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.seen: list[Seen] = []
        self.max_in_flight = 0
        self._epoch = 0
        self._live: Counter[int] = Counter()
        self.port = 0
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fake-llm-server", daemon=True)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._stopping: asyncio.Event | None = None

    @property
    def url(self) -> str:
        """The server root, e.g. http://127.0.0.1:PORT (OpenAI base_url is this + "/v1")."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeServer:
        """Start serving on a free port; returns self."""
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._open(), self._loop).result(timeout=10)
        return self

    def stop(self) -> None:
        """Stop serving, end open connections and the thread."""
        asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    @property
    def in_flight(self) -> int:
        """Requests in flight that arrived since the last reset."""
        return self._live[self._epoch]

    def reset(self) -> None:
        """Forget counts, requests seen and the concurrency gauge."""
        with self._lock:
            self.counts.clear()
            self.seen.clear()
            self.max_in_flight = 0
            self._epoch += 1

    def requests_for(self, model: str) -> list[Seen]:
        """The requests seen whose body named `model`."""
        return [s for s in self.seen if s.body.get("model") == model]

    async def _open(self) -> None:
        self._stopping = asyncio.Event()
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, backlog=2048)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        assert self._stopping is not None
        self._stopping.set()
        for writer in list(self._writers):
            writer.close()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=5)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        try:
            while await self._one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # the client went away; nothing to answer
        finally:
            self._tasks.discard(task)
            self._writers.discard(writer)
            writer.close()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Serve one request; False when the connection must close."""
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        path = lines[0].split(" ")[1]
        headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
        if "content-length" not in headers:
            await _send(writer, 411, b"{}")
            return False
        raw = await reader.readexactly(int(headers["content-length"]))
        body = json.loads(raw) if raw else {}
        model = str(body.get("model", ""))
        with self._lock:
            self.counts[model] += 1
            count = self.counts[model]
            self.seen.append(Seen(path, headers, body))
            epoch = self._epoch
            self._live[epoch] += 1
            self.max_in_flight = max(self.max_in_flight, self._live[epoch])
        try:
            return await self._dispatch(writer, path, headers, body, count)
        finally:
            with self._lock:
                self._live[epoch] -= 1

    async def _dispatch(self, writer: asyncio.StreamWriter, path: str, headers: dict[str, str],
                        body: dict[str, Any], count: int) -> bool:
        anthropic = path == "/v1/messages"
        try:
            if path not in ("/v1/chat/completions", "/v1/messages"):
                raise _Reply(404, f"no route {path}")
            if anthropic and "bad-key" in (headers.get("x-api-key"), headers.get("authorization", "")[7:]):
                raise _Reply(401, "invalid x-api-key")
            return await self._scenario(writer, body, count, anthropic)
        except _Reply as reply:
            payload = _error_json(reply.status, reply.message, anthropic)
            await _send(writer, reply.status, payload, reply.headers)
            return True

    async def _pause(self, seconds: float) -> bool:
        """Wait `seconds`; False if the server is stopping meanwhile."""
        assert self._stopping is not None
        try:
            await asyncio.wait_for(self._stopping.wait(), seconds)
        except asyncio.TimeoutError:
            return True
        return False

    async def _scenario(self, writer: asyncio.StreamWriter, body: dict[str, Any], count: int,
                        anthropic: bool) -> bool:
        model = str(body.get("model", ""))
        if model in _STATUS:
            raise _Reply(_STATUS[model], f"scenario {model}")
        fail = _FAIL.match(model)
        if fail and count <= int(fail.group(1)):
            raise _Reply(500, f"planned failure {count}")
        if model == "rate-limit-then-ok" and count == 1:
            raise _Reply(429, "slow down", {"Retry-After": "3"})
        slow = _SLOW.match(model)
        if slow and not await self._pause(int(slow.group(1)) / (1000 if slow.group(2) == "ms" else 1)):
            return False
        if model == "reset-mid-body":
            await _reset_mid_body(writer)
            return False
        if model == "malformed":
            await _send(writer, 200, b'{"choices": [ {"message": ')
            return True
        if model == "missing-fields":
            await _send(writer, 200, b'{"id": "x", "type": "message"}')
            return True
        text, usage = _answer(body, anthropic)
        if body.get("stream") and not anthropic:
            await _stream(writer, model, text, usage, body, cut=model == "stream-cut")
            return False
        payload = _anthropic_reply(model, text, usage) if anthropic else _openai_reply(model, text, usage)
        await _send(writer, 200, payload)
        return True


def _words(text: str) -> int:
    return len(text.split())


def _answer(body: dict[str, Any], anthropic: bool) -> tuple[str, dict[str, int] | None]:
    """The echo text and its usage (input: words of every message and system prompt; output: words of text)."""
    messages = body.get("messages", [])
    system = body.get("system", "") if anthropic else "\n".join(
        m["content"] for m in messages if m.get("role") == "system")
    users = [m["content"] for m in messages if m.get("role") == "user"]
    text = (f"[system: {system}] " if system else "") + "echo: " + (users[-1] if users else "")
    if body.get("model") == "surrogate":
        text += " \ud800"
    usage = {"in": sum(_words(m["content"]) for m in messages) + (_words(system) if anthropic else 0),
             "out": _words(text)}
    return text, (None if body.get("model") == "no-usage" else usage)


def _openai_reply(model: str, text: str, usage: dict[str, int] | None) -> bytes:
    data: dict[str, Any] = {"id": "chatcmpl-1", "object": "chat.completion", "model": model, "choices": [
        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}
    if usage is not None:
        data["usage"] = {"prompt_tokens": usage["in"], "completion_tokens": usage["out"],
                         "total_tokens": usage["in"] + usage["out"]}
    return json.dumps(data).encode()


def _anthropic_reply(model: str, text: str, usage: dict[str, int] | None) -> bytes:
    u = usage or {"in": 0, "out": 0}
    return json.dumps({"id": "msg_1", "type": "message", "role": "assistant", "model": model,
                       "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                       "stop_sequence": None, "usage": {"input_tokens": u["in"], "output_tokens": u["out"]}}).encode()


def _error_json(status: int, message: str, anthropic: bool) -> bytes:
    if anthropic:
        kinds = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                 404: "not_found_error", 429: "rate_limit_error", 529: "overloaded_error"}
        return json.dumps({"type": "error", "error": {"type": kinds.get(status, "api_error"),
                                                      "message": message}}).encode()
    return json.dumps({"error": {"message": message, "type": "error", "code": status}}).encode()


async def _send(writer: asyncio.StreamWriter, status: int, payload: bytes,
                headers: dict[str, str] | None = None) -> None:
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    head = (f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\n{extra}\r\n")
    writer.write(head.encode("latin-1") + payload)
    await writer.drain()


async def _reset_mid_body(writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n"
                 b'{"id": "chatcmpl-1", "choices": [')
    await writer.drain()
    await asyncio.sleep(0.01)
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def _stream(writer: asyncio.StreamWriter, model: str, text: str, usage: dict[str, int] | None,
                  body: dict[str, Any], cut: bool) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
    pieces = re.findall(r"\S+\s*", text)
    events: list[dict[str, Any]] = [{"model": model, "choices": [{"index": 0, "delta": {"role": "assistant"}}]}]
    events += [{"model": model, "choices": [{"index": 0, "delta": {"content": p}}]} for p in pieces]
    events.append({"model": model, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    if usage is not None and body.get("stream_options", {}).get("include_usage"):
        events.append({"model": model, "choices": [], "usage": {
            "prompt_tokens": usage["in"], "completion_tokens": usage["out"]}})
    for event in events[:2] if cut else events:
        writer.write(b"data: " + json.dumps(event).encode() + b"\n\n")
        await writer.drain()
    if not cut:
        writer.write(b"data: [DONE]\n\n")
    await writer.drain()


def main() -> None:
    """Serve until stdin closes; print the port first (used by benchmarks/provider_bench.py)."""
    server = FakeServer().start()
    print(server.port, flush=True)
    try:
        sys.stdin.read()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
