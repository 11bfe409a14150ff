"""A score cache keyed by (text hash, task id), with in-flight de-duplication.

The base version's scores are computed once and shared by every candidate made against it; two gates asking for
the same score at the same time cause one call, not two. The outputs behind the latest scores are kept too (a
bounded number), so that a rollout of a head on a task the gate already ran it on needs no call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio

from agentgrad.core.artifact import content_hash


@dataclass(frozen=True)
class Scored:
    """What a computation of a score gives: the score, and the output of the run behind it when it is a text."""

    score: float
    output: str | None = None


class ScoreCache:
    """Caches `compute(text, task_id)` (a `Scored`: the score, kept, and the run's output, kept for reuse); `get`
    waits for an in-flight computation of the same key."""

    def __init__(self, compute: Callable[[str, str], Awaitable[Scored]], *, max_entries: int = 200_000,
                 max_outputs: int = 4_096) -> None:
        self.compute = compute
        self.max_entries, self.max_outputs = max_entries, max_outputs
        self.outputs: dict[tuple[str, str], str] = {}  # (text hash, task) -> the output of the run scored
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

    def put_output(self, text: str, task_id: str, output: str) -> None:
        """Keep the output of the run behind the score of `text` on `task_id` (the oldest goes past the bound)."""
        if len(self.outputs) >= self.max_outputs:
            del self.outputs[next(iter(self.outputs))]
        self.outputs[(content_hash(text), task_id)] = output

    def reusable(self, text: str, task_id: str) -> tuple[float, str] | None:
        """(score, output) of `text` on `task_id` when both are kept, else None; the output is handed out once."""
        key = (content_hash(text), task_id)
        if key not in self.outputs or key not in self.scores:
            return None
        return self.scores[key], self.outputs.pop(key)

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
            scored = await self.compute(text, task_id)
            self.put(text, task_id, scored.score)
            if scored.output is not None:
                self.put_output(text, task_id, scored.output)
        finally:
            del self.pending[key]
            event.set()
        return scored.score
