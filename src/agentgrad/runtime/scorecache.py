"""A score cache keyed by (text hash, task id), with in-flight de-duplication.

The base version's scores are computed once and shared by every candidate made against it; two gates asking for
the same score at the same time cause one call, not two.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio

from agentgrad.core.artifact import content_hash


class ScoreCache:
    """Caches `compute(text, task_id)`; `get` waits for an in-flight computation of the same key."""

    def __init__(self, compute: Callable[[str, str], Awaitable[float]], *, max_entries: int = 200_000) -> None:
        self.compute = compute
        self.max_entries = max_entries
        self.scores: dict[tuple[str, str], float] = {}
        self._tasks: dict[str, set[str]] = {}  # text hash -> tasks with a cached score
        self.pending: dict[tuple[str, str], anyio.Event] = {}
        self.hits = 0
        self.misses = 0

    def put(self, text: str, task_id: str, score: float) -> None:
        """Remember a score computed elsewhere (e.g. a rollout's reward)."""
        if len(self.scores) >= self.max_entries:
            old_text, old_task = next(iter(self.scores))
            del self.scores[(old_text, old_task)]
            self._tasks.get(old_text, set()).discard(old_task)
        digest = content_hash(text)
        self.scores[(digest, task_id)] = score
        self._tasks.setdefault(digest, set()).add(task_id)

    def tasks(self, text: str) -> frozenset[str]:
        """The tasks `text` has a cached score on (no hit is counted)."""
        return frozenset(self._tasks.get(content_hash(text), ()))

    def peek(self, text: str, task_id: str) -> float | None:
        """The cached score, if there is one (counted as a hit); None, without computing anything, otherwise."""
        score = self.scores.get((content_hash(text), task_id))
        self.hits += score is not None
        return score

    async def get(self, text: str, task_id: str) -> float:
        """The score of `text` on `task_id`, computed at most once."""
        key = (content_hash(text), task_id)
        while key in self.pending:
            await self.pending[key].wait()
        if key in self.scores:
            self.hits += 1
            return self.scores[key]
        self.misses += 1
        event = self.pending[key] = anyio.Event()
        try:
            score = await self.compute(text, task_id)
            self.put(text, task_id, score)
        finally:
            del self.pending[key]
            event.set()
        return score
