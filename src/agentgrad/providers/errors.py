"""The provider error taxonomy. Each error says which provider, which URL path, which status and what came back.

`transient` tells `Retry` whether the same request may succeed if sent again: auth, not-found and bad-request
errors are permanent and fail fast; rate limits, server errors, timeouts, lost connections and malformed answers
are transient. Anything that is not a `ProviderError` (a KeyError in a grader, a TypeError in a callback) is a
bug and is never retried.
"""

from __future__ import annotations

import email.utils
import json
import math
import time
from typing import Any, ClassVar

from agentgrad.errors import AgentgradError, SystemicError

EXCERPT_CHARS = 200


class InvalidMessageError(AgentgradError, ValueError):
    """A message or conversation that is malformed: unknown role, non-text content, empty conversation."""


class SyncInLoopError(AgentgradError, RuntimeError):
    """`complete_sync` was called from inside a running event loop; await `provider.complete` there instead."""


class ProviderError(AgentgradError):
    """A provider call failed.

    Args:
        message: what went wrong.
        provider: the provider's name.
        path: the URL path (or command) that failed.
        status: the HTTP status or exit code, None if there was no answer.
        excerpt: the first characters of the answer body or stderr, whitespace collapsed.
        retry_after: seconds the server asked us to wait, if it said.
    """

    transient: ClassVar[bool] = False
    kind: ClassVar[str] = "error"

    def __init__(self, message: str, *, provider: str = "", path: str = "", status: int | None = None,
                 excerpt: str = "", retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.provider = provider
        self.path = path
        self.status = status
        self.excerpt = excerpt
        self.retry_after = retry_after
        self.attempts = 1

    def __str__(self) -> str:
        where = " ".join(p for p in (self.provider, self.path) if p)
        status = f" status {self.status}" if self.status is not None else ""
        body = f" | body: {self.excerpt}" if self.excerpt else ""
        tries = f" (after {self.attempts} attempts)" if self.attempts > 1 else ""
        return f"{self.kind}: {where}{status}: {self.message}{body}{tries}"


class AuthError(ProviderError, SystemicError):
    """401/403: the key is missing, wrong or lacks permission. Permanent: it stops a run at once."""

    kind = "auth"


class NotFoundError(ProviderError, SystemicError):
    """404: unknown model or wrong base URL. Permanent: it stops a run at once."""

    kind = "not_found"


class BadRequestError(ProviderError):
    """Any other 4xx: the request itself is wrong (too long, bad parameter). Permanent."""

    kind = "bad_request"


class RateLimitError(ProviderError):
    """429: slow down; `retry_after` holds the server's `Retry-After` in seconds when it sent one. Transient."""

    transient = True
    kind = "rate_limit"


class ServerError(ProviderError):
    """5xx (or an error event inside a stream): the server failed. Transient."""

    transient = True
    kind = "server"


class ProviderTimeout(ProviderError):
    """No complete answer within the timeout (or a command ran past its timeout and was killed). Transient."""

    transient = True
    kind = "timeout"


class ConnectionLost(ProviderError):
    """Connection refused, reset, or closed before the whole answer arrived. Transient."""

    transient = True
    kind = "connection"


class MalformedResponse(ProviderError):
    """A 2xx answer that is not valid JSON or lacks required fields. Transient, but counted apart by `Retry`."""

    transient = True
    kind = "malformed"


class CommandFailed(ProviderError):
    """A command-line agent exited non-zero; `status` is its exit code, `excerpt` its stderr. Permanent."""

    kind = "command_failed"


class SilentEndpointError(ProviderError, SystemicError):
    """The endpoint never answered the first call within its bound (it accepts connections and stays silent, or
    the address is wrong). Permanent for the run: it stops at once."""

    kind = "silent"


class CircuitOpen(ProviderError):
    """The circuit breaker is open: the call was refused without being sent. `retry_after` says when it half-opens.

    Not retried by `Retry` (retrying in the same call would only spin); the caller may try again later.
    """

    kind = "circuit_open"


def excerpt(body: str | bytes, limit: int = EXCERPT_CHARS) -> str:
    """The first `limit` characters of `body` with whitespace collapsed (bytes are decoded leniently)."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + "..."


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a `Retry-After` header: delay-seconds or an HTTP date; None if absent or unreadable.

    `now` is the current UNIX time (defaults to `time.time()`); a date in the past gives 0.0.
    """
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if not math.isfinite(seconds):
        return None
    return max(seconds, 0.0)


def error_for_status(status: int, body: str | bytes, *, provider: str, path: str,
                     retry_after: float | None = None, message: str | None = None) -> ProviderError:
    """The taxonomy error for an HTTP error status (call only for status >= 400)."""
    cls: type[ProviderError]
    if status in (401, 403):
        cls = AuthError
    elif status == 404:
        cls = NotFoundError
    elif status == 408:
        cls = ProviderTimeout
    elif status == 429:
        cls = RateLimitError
    elif status >= 500:
        cls = ServerError
    else:
        cls = BadRequestError
    detail = message or api_message(body)
    text = f"HTTP {status}: {detail}" if detail else f"HTTP {status}"
    return cls(text, provider=provider, path=path, status=status, excerpt=excerpt(body),
               retry_after=retry_after)


def api_message(body: str | bytes) -> str | None:
    """The human message inside an error body: OpenAI's and Anthropic's `{"error": {"message"}}` or `{"error": str}`."""
    try:
        data: Any = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return excerpt(error["message"])
    if isinstance(error, str):
        return excerpt(error)
    return None
