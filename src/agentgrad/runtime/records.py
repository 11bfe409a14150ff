"""The values a run passes between stages, and `Recorder`, the part of the engine that logs and counts.

Every event goes to the run directory's event log as it happens, then to the user's callbacks. Events that belong
together (the verdicts, commits and held work of one optimizer step) are logged in one transaction.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

import anyio

from agentgrad.core.diff import Diff
from agentgrad.core.evidence import Evidence
from agentgrad.errors import AgentgradError, SystemicError
from agentgrad.optim.base import Candidate
from agentgrad.store.events import EventLog
from agentgrad.store.kinds import WALL, EventKind


@dataclass(frozen=True)
class Snapshot:
    """A worker's view of the artifact: a version and its text."""

    version: int
    text: str


@dataclass(frozen=True)
class Rollout:
    """One call of `run` on a training task and its reward."""

    worker: str
    task_id: str
    snapshot: Snapshot
    output: str | None
    reward: float
    error: str | None


@dataclass(frozen=True)
class Proposed:
    """A diff made from a rollout (or by a repair), on its way to the gate; `snapshot` is its base."""

    diff: Diff
    snapshot: Snapshot
    origin: Rollout | None


def candidate_to_dict(candidate: Candidate) -> dict[str, Any]:
    """A JSON-ready candidate, for the step log."""
    return {"diff": candidate.diff.to_dict(), "evidence": candidate.evidence.to_dict(),
            "recheck": candidate.recheck, "parts": [p.to_dict() for p in candidate.parts], "looks": candidate.looks,
            "origin": candidate.origin, "replicate": candidate.replicate, "shows_origin": candidate.shows_origin,
            "closing": candidate.closing}


def candidate_from_dict(data: Mapping[str, Any]) -> Candidate:
    """The inverse of `candidate_to_dict`."""
    return Candidate(Diff.from_dict(data["diff"]), Evidence.from_dict(data["evidence"]), bool(data["recheck"]),
                     tuple(Diff.from_dict(p) for p in data["parts"]), int(data.get("looks", 1)), data.get("origin"),
                     bool(data.get("replicate", False)), bool(data.get("shows_origin", False)),
                     bool(data.get("closing", False)))


WALL_EVERY = 1.0  # seconds between two notes of the elapsed wall time while the loop runs


class Recorder:
    """Logs events durably and keeps the run's counters.

    Args:
        events: the run directory's event log.
        clock: the time port (seconds); the run's elapsed time and the optimizer's `ctx.now` come from it.
        callbacks: called with (kind, payload) after each event is logged.
    State: `counts` (event counters), `calls` (call ids handed out), `steps` (optimizer steps done), the wall time
    of earlier sessions, `in_step` (True between a step's first and last log write), and `wall_every` (seconds
    between two notes of the elapsed time in the log during `group_commit`).
    """

    def __init__(self, events: EventLog, clock: Callable[[], float], callbacks: Sequence[Callable[..., Any]]) -> None:
        self.events, self.clock, self.callbacks = events, clock, list(callbacks)
        self.counts: Counter[str] = Counter()
        self.calls = 0
        self.steps = 0
        self.started = clock()
        self.wall_before = 0.0
        self.in_step = False
        self.wall_every = WALL_EVERY
        self._group: anyio.Event | None = None  # set to ask the flusher for a write; None: write at once
        self._told: list[tuple[EventKind, Mapping[str, Any]]] | None = None  # inside `unit`: events the callbacks await

    def log_soon(self, kind: EventKind, payload: Mapping[str, Any]) -> None:
        """Log a frequent event (dispatch, done): inside `group_commit` it is written with the others of this turn
        of the event loop, in one transaction, before any task that logged it runs again."""
        group = self._group
        self.events.append(kind, payload, defer=group is not None)
        if group is not None:
            group.set()

    @asynccontextmanager
    async def group_commit(self) -> AsyncIterator[None]:
        """Write `log_soon` events in groups while the block runs (a flusher task wakes once per turn); note the
        elapsed wall time in the log about every `WALL_EVERY` seconds, so a killed run's resume counts it."""
        async def flusher() -> None:
            noted = self.clock()
            while True:
                assert self._group is not None
                with anyio.move_on_after(self.wall_every):
                    await self._group.wait()
                self._group = anyio.Event()
                self.events.flush()
                if self.clock() - noted >= self.wall_every:  # a killed run loses at most about this much time
                    noted = self.clock()
                    self.events.put(WALL, {"wall_time": self.elapsed()})

        try:
            async with anyio.create_task_group() as group:
                self._group = anyio.Event()
                group.start_soon(flusher)
                try:
                    yield
                finally:
                    group.cancel_scope.cancel()
        finally:
            self._group = None
            self.events.flush()

    @contextmanager
    def unit(self) -> Iterator[None]:
        """One unit of work: the store writes and events inside the block commit together in one transaction
        (`SQLiteStore.transaction`, which the log shares), or none do; the callbacks hear of the events after the
        commit. Nested units join the outer one."""
        if self._told is not None:
            yield
            return
        self._told = []
        try:
            with self.events.transaction():
                yield
            told = self._told
        finally:
            self._told = None
        for kind, payload in told:
            self.tell(kind, payload)

    def emit(self, kind: EventKind, payload: Mapping[str, Any]) -> None:
        """Log an event durably (with the enclosing `unit`, if any), then tell the callbacks."""
        self.events.append(kind, payload)
        self._heard(kind, payload)

    def tell(self, kind: EventKind, payload: Mapping[str, Any]) -> None:
        """Tell the callbacks about an event that is not logged on its own (e.g. `call`: its `done` row is). A
        callback that raises stops the run with a `SystemicError` naming it and the event (the log is intact)."""
        for callback in self.callbacks:
            try:
                callback(kind, payload)
            except AgentgradError:
                raise
            except Exception as exc:  # the user's callback: say which failed, and on what
                name = getattr(callback, "__qualname__", type(callback).__name__)
                raise SystemicError(f"callback {name} failed on the {getattr(kind, 'value', kind)!r} event: "
                                    f"{type(exc).__name__}: {exc}") from exc

    def emit_many(self, rows: Sequence[tuple[EventKind, Mapping[str, Any]]]) -> None:
        """Log several events in one transaction (all or none), then tell the callbacks."""
        self.events.append_many(rows)
        for kind, payload in rows:
            self._heard(kind, payload)

    def _heard(self, kind: EventKind, payload: Mapping[str, Any]) -> None:
        if self._told is None:
            self.tell(kind, payload)
        else:
            self._told.append((kind, payload))

    def elapsed(self) -> float:
        """Wall time of this run so far, over resumes."""
        return self.wall_before + self.clock() - self.started
