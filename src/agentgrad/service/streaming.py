"""A run's event log as a Server-Sent Events stream that resumes: each event is sent with its sequence number as
its ``id``, so a client that reconnects with ``Last-Event-ID`` gets exactly the events after the last one it saw
(none lost, none twice).

The stream polls the log (on a worker thread; it only reads) every `Settings.stream_poll` seconds, sends a comment
after `Settings.heartbeat` seconds of silence, and ends with an ``end`` event once the job is no longer active and
every event has been sent (or when `max_seconds` have passed).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import AsyncIterator, Callable, Sequence
from functools import partial
from typing import Any

import anyio
import anyio.to_thread

from agentgrad.cli.rundir import RunDir
from agentgrad.store.events import Event, EventLog


def finite(value: Any) -> Any:
    """`value` with every non-finite float (which JSON cannot hold) replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def frame(event: Event) -> str:
    """One event as an SSE message."""
    data = json.dumps({"seq": event.seq, "kind": event.kind, "at": event.at, "payload": finite(event.payload)},
                      ensure_ascii=True, allow_nan=False, default=str)
    return f"id: {event.seq}\nevent: {event.kind}\ndata: {data}\n\n"


async def stream(target: RunDir, *, after: int, kinds: Sequence[str] | None, done: Callable[[], bool],
                 poll: float, heartbeat: float, max_seconds: float) -> AsyncIterator[str]:
    """The SSE messages of the run's events after `after` (of `kinds`, if given)."""
    # a normal (not read-only) connection, which only reads: a read-only one opened while no writer has the
    # database open falls back to SQLite's "immutable" mode and would not see the worker's later events
    log = await anyio.to_thread.run_sync(EventLog, target.path)
    try:
        yield "retry: 1000\n\n"
        last, quiet_since, deadline = after, time.monotonic(), time.monotonic() + max_seconds
        while True:
            finished = done()
            events = await anyio.to_thread.run_sync(partial(log.read, kinds or None, after=last))
            for event in events:
                yield frame(event)
                last = event.seq
            now = time.monotonic()
            if events:
                quiet_since = now
                continue
            if finished:
                yield f"event: end\ndata: {json.dumps({'last': last})}\n\n"
                return
            if now >= deadline:
                return
            if now - quiet_since >= heartbeat:
                quiet_since = now
                yield ": keep-alive\n\n"
            await anyio.sleep(poll)
    finally:
        log.close()
