"""Progress while a run goes: a rich live panel, one JSON line per event, or nothing (quiet).

`LiveProgress` is an evolve callback and a context manager: it reads the run's event log (its own read-only
connection; the log has every dispatch and result, which callbacks do not see) a few times a second and shows
in-flight work per stage, throughput against the limit the run slots allow, verdicts, the best validation reward
with a sparkline, tokens and cost against the budget, and an ETA.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any

from agentgrad.cli.stats import STAGES, RunStats, sparkline

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.live import Live

    from agentgrad.store.events import EventLog


def _amount(value: float, kind: str) -> str:
    if kind == "cost":
        return f"${value:,.2f}"
    if kind == "wall_time":
        return duration(value)
    return f"{value:,.0f}"


def duration(seconds: float | None) -> str:
    """A short human duration ("4.2 s", "3 min 05 s", "1 h 02 min")."""
    if seconds is None:
        return "–"
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} min"


def against(stats: RunStats, kind: str) -> str:
    """``used / limit`` of one budget kind."""
    used, limit = stats.used()[kind], stats.limit(kind)
    return f"{_amount(used, kind)} / {'–' if limit is None else _amount(limit, kind)}"


def panel(stats: RunStats, title: str, now: float, wall_before: float = 0.0) -> RenderableType:
    """The live panel for `stats` at time `now`."""
    from rich.console import Group
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, pad_edge=False, header_style="bold")
    for name in ("stage", "in flight", "done", "budget", "per s"):
        table.add_column(name, justify="left" if name == "stage" else "right")
    for kind in STAGES:
        limit = stats.limit(kind)
        table.add_row(kind.replace("_", " "), str(stats.in_flight(kind)), f"{stats.done[kind]:,}",
                      "–" if limit is None else f"{limit:,.0f}", f"{stats.rate([kind], now):.1f}")
    ceiling = stats.rate_limit()
    rate = stats.rate(["rollouts", "gate_evals"], now)
    lines = [f"run calls/s {rate:.1f}" + (f" of ≈{ceiling:.0f} the slots allow" if ceiling else "")]
    counts = stats.outcome_counts()
    mix = " · ".join(f"{k} {counts[k]}" for k in ("accepted", "rejected", "stale", "tabu") if counts[k])
    others = sum(counts.values()) - sum(counts[k] for k in ("accepted", "rejected", "stale", "tabu"))
    lines.append(f"proposals {stats.proposals}" + (f" · {mix}" if mix else "") + (f" · other {others}" if others
                                                                                   else "")
                 + (f" · pending {stats.pending()}" if stats.pending() else ""))
    history = stats.val_history()
    if history:
        lines.append(f"best validation reward {max(history):.3f}  {sparkline(history)}")
    lines.append(f"tokens {against(stats, 'tokens')} · cost {against(stats, 'cost')}")
    eta = stats.eta(now, wall_before)
    lines.append(f"elapsed {duration(stats.elapsed(now, wall_before))} · ETA {'~' + duration(eta) if eta else '–'}")
    recent = [Text(f"  {item['diff_id']} {item['outcome']} [{item['stage']}] {item['reason']}", no_wrap=True,
                   overflow="ellipsis") for item in list(stats.recent)[-3:]]
    return Panel(Group(table, Text("\n".join(lines)), *recent), title=title, expand=False)


class LiveProgress:
    """A rich live panel over a run directory's event log; use as a context manager and pass it as a callback.

    Args:
        run_dir: the run directory (its database may not exist yet; the panel waits for it).
        console: where to draw.
        min_interval: the least time between two refreshes a callback triggers.
    State: the event log connection (opened on the first refresh), the counters, the last refresh time.
    """

    def __init__(self, run_dir: Path, console: Console, *, min_interval: float = 0.25) -> None:
        self.run_dir, self.console, self.min_interval = run_dir, console, min_interval
        self.stats = RunStats()
        self.wall_before = 0.0
        self._log: EventLog | None = None
        self._lock = threading.Lock()
        self._live: Live | None = None
        self._last = 0.0

    def poll(self) -> RunStats:
        """Read the events logged since the last poll."""
        from agentgrad.store.events import EventLog

        with self._lock:
            if self._log is None:
                if not (self.run_dir / "agentgrad.db").is_file():
                    return self.stats
                self._log = EventLog(self.run_dir)
                checkpoint = self._log.get("checkpoint") or {}
                self.wall_before = float(checkpoint.get("wall_time", 0.0))
            if not self.stats.budget:
                self.stats.configure(self._log.get("config"))
            self.stats.feed(self._log.read(after=self.stats.seq))
        return self.stats

    def render(self) -> RenderableType:
        stats = self.poll()
        return panel(stats, f"agentgrad · {self.run_dir}", time.time(), self.wall_before)

    def __call__(self, kind: str, payload: Mapping[str, Any]) -> None:
        """The evolve callback: refresh now (throttled), at once for the run's last event."""
        now = time.monotonic()
        if self._live is not None and (now - self._last >= self.min_interval or kind in ("finished", "failed")):
            self._last = now
            self._live.refresh()

    def __enter__(self) -> LiveProgress:
        from rich.live import Live

        self._live = Live(get_renderable=self.render, console=self.console, refresh_per_second=4,
                          redirect_stdout=False, redirect_stderr=False)
        self._live.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
        with self._lock:
            if self._log is not None:
                self._log.close()
                self._log = None


class JsonProgress:
    """An evolve callback that writes one JSON object per event: ``{"event": kind, "at": unix time, "data": {...}}``.

    Args:
        out: the text stream (flushed after every line).
        skip: event kinds not written (by default `call`, one per user-function call: the run's event log has
            them as `done` rows).
    """

    def __init__(self, out: IO[str], *, skip: frozenset[str] = frozenset({"call"})) -> None:
        self.out, self.skip = out, skip

    def __call__(self, kind: str, payload: Mapping[str, Any]) -> None:
        if kind in self.skip:
            return
        self.out.write(json.dumps({"event": kind, "at": time.time(), "data": dict(payload)}) + "\n")
        self.out.flush()
