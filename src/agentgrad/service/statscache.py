"""Each run's counters (`RunStats`), kept between requests and fed only the events logged since the last one.

Status, usage and rewards are folds over a run's whole event log. Replayed per request they cost a second or more
on a long run; kept here, a request reads only the new events. A reader gets a `RunStats.snapshot`, so the next
request's feeding never changes what another request is rendering. A log that went backwards (the run directory
was made anew) is read again from the start. At most `max_runs` runs are kept, the least recently read forgotten.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from agentgrad.cli.rundir import RunDir
from agentgrad.cli.stats import RunStats


@dataclass
class _Entry:
    lock: threading.Lock = field(default_factory=threading.Lock)
    stats: RunStats | None = None


class StatsCache:
    """`RunStats` per run directory (thread-safe: the service's routes run in a thread pool)."""

    def __init__(self, max_runs: int = 64) -> None:
        self.max_runs = max_runs
        self._runs: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self.events_read = 0  # events fed in all, for tests and the benchmark

    def _entry(self, target: RunDir) -> _Entry:
        key = str(target.path.resolve())
        with self._lock:
            entry = self._runs.get(key)
            if entry is None:
                entry = self._runs[key] = _Entry()
            self._runs.move_to_end(key)
            while len(self._runs) > self.max_runs:
                self._runs.popitem(last=False)
            return entry

    def read(self, target: RunDir) -> tuple[RunStats, dict[str, Any]]:
        """The run's counters up to its last event (a snapshot), and its last checkpoint (empty if none): what
        `cli.status.read_stats` gives, reading only what was logged since this run was last read."""
        entry = self._entry(target)
        with entry.lock, target.events() as log:
            if entry.stats is None or log.last_seq() < entry.stats.seq:
                entry.stats = RunStats()
            if not entry.stats.budget:
                entry.stats.configure(log.get("config"))
            events = log.read(after=entry.stats.seq)
            entry.stats.feed(events)
            self.events_read += len(events)
            checkpoint = log.get("checkpoint")
            return entry.stats.snapshot(), dict(checkpoint) if isinstance(checkpoint, dict) else {}


__all__ = ["StatsCache"]
