"""`Cache`: a SQLite response cache for deterministic requests."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

from agentgrad.errors import ConfigError
from agentgrad.providers.base import Completion, Message, Provider, Usage, clean_text
from agentgrad.providers.middleware.base import Middleware

_SCHEMA = """
CREATE TABLE IF NOT EXISTS completions (
  key TEXT PRIMARY KEY, text TEXT NOT NULL, model TEXT NOT NULL, finish_reason TEXT,
  input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL, latency REAL NOT NULL, created REAL NOT NULL
)
"""
# Transport settings that do not change the answer.
IGNORED_PARAMS = frozenset({"timeout", "stream"})


class Cache(Middleware):
    """Answers repeated requests from a SQLite file; a hit is `Completion(cached=True)` with zero cost.

    The key is a SHA-256 of the provider's name, the messages and every param but `timeout` and `stream`
    (model included). Only deterministic requests are cached: `temperature=0` given explicitly, because a
    missing temperature means the server's default, which is usually above 0. `force=True` caches everything.
    Errors are never cached.

    Args:
        inner: the provider.
        path: the SQLite file (":memory:" for a throwaway cache).
        force: cache whatever the temperature.
    State: the database, and counters of hits, misses and bypasses (`stats()`).
    """

    def __init__(self, inner: Provider, path: str | os.PathLike[str], *, force: bool = False) -> None:
        super().__init__(inner)
        self.force = force
        self._lock = threading.Lock()
        self._db = sqlite3.connect(os.fspath(path), check_same_thread=False, isolation_level=None)
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(_SCHEMA)
        self._counts: Counter[str] = Counter()

    def cacheable(self, params: dict[str, Any]) -> bool:
        """True if a request with these params may be answered from (and stored in) the cache."""
        temperature = params.get("temperature")
        return self.force or (isinstance(temperature, (int, float)) and temperature == 0)

    def key(self, messages: Sequence[Message], params: dict[str, Any]) -> str:
        """The cache key of a request (hex SHA-256); raises `ConfigError` if a param is not JSON data."""
        request = {"v": 1, "provider": self.name, "messages": [[m.role, m.content] for m in messages],
                   "params": {k: v for k, v in params.items() if k not in IGNORED_PARAMS}}
        try:
            text = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"Cache on {self.name}: request params must be JSON data to be hashed: {exc}") from None
        return hashlib.sha256(text.encode("ascii")).hexdigest()

    async def complete(self, messages: Sequence[Message], **params: Any) -> Completion:
        """A stored answer if there is one, else the inner provider's answer (stored when cacheable)."""
        if not self.cacheable(params):
            self._counts["bypassed"] += 1
            return await self.inner.complete(messages, **params)
        start = time.perf_counter()
        key = self.key(messages, params)
        hit = self._get(key, start)
        if hit is not None:
            self._counts["hits"] += 1
            return hit
        self._counts["misses"] += 1
        result = await self.inner.complete(messages, **params)
        self._put(key, result)
        return result

    def stats(self) -> dict[str, int]:
        """Counters: hits, misses, bypassed."""
        return {k: self._counts[k] for k in ("hits", "misses", "bypassed")}

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()

    async def aclose(self) -> None:
        """Close the database and the inner provider."""
        self.close()
        await super().aclose()

    def _get(self, key: str, start: float) -> Completion | None:
        with self._lock:
            row = self._db.execute("SELECT text, model, finish_reason, input_tokens, output_tokens FROM completions "
                                   "WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        text, model, finish, tokens_in, tokens_out = row
        return Completion(text, Usage(tokens_in, tokens_out, 0.0), time.perf_counter() - start, model, finish,
                          cached=True)

    def _put(self, key: str, c: Completion) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO completions VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                             (key, clean_text(c.text), c.model, c.finish_reason, c.usage.input_tokens,
                              c.usage.output_tokens, c.latency, time.time()))
