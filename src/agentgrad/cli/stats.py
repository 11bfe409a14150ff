"""What a run's event log says about it: calls per stage (in flight and done), budget use, verdicts, commits and the
validation reward of each version. Fed events in log order, incrementally, so a live view can keep up with a
running process and `status` can read a finished or killed one.

The validation reward of a version is estimated from the gate's evidence: the mean score of that version on the
validation tasks the gate scored it on (as the base of later candidates, or as the accepted candidate itself).
"""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from agentgrad.runtime.accounts import NEVER_STARTED
from agentgrad.store.events import Event

STAGES = ("rollouts", "proposals", "gate_evals")
RUN_KINDS = ("rollouts", "gate_evals")
LIMITS = ("rollouts", "proposals", "gate_evals", "calls", "tokens", "cost", "wall_time")
_FINAL_SKIP = ("recheck", "full_check", "deferred")
SPARKS = "▁▂▃▄▅▆▇█"


@dataclass
class Commit:
    """One committed version, when it happened and how many rollouts had finished by then."""

    at: float
    version: int
    diff: str
    rollouts: int


@dataclass
class RunStats:
    """Counters over a run's events. Feed with `feed(events)`; `budget` comes from the log's "config" document.

    State: the last sequence number read, per-stage call counts, the calls still open (dispatched, not done),
    actual use per budget kind, verdicts per diff, commits, per-version validation scores and session marks.
    """

    budget: Mapping[str, Any] = field(default_factory=dict)
    slots: int | None = None
    seq: int = 0
    first_at: float | None = None
    last_at: float | None = None
    session_at: float | None = None
    dispatched: Counter[str] = field(default_factory=Counter)
    done: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    open_calls: dict[int, tuple[str, Mapping[str, float]]] = field(default_factory=dict)
    actual: dict[str, float] = field(default_factory=lambda: dict.fromkeys(LIMITS, 0.0))
    run_seconds: float = 0.0
    proposals: int = 0
    proposal_failed: Counter[str] = field(default_factory=Counter)
    verdicts: dict[str, str] = field(default_factory=dict)
    commits: list[Commit] = field(default_factory=list)
    steps: int = 0
    resumes: int = 0
    failed: str | None = None
    finished: Mapping[str, Any] | None = None
    scores: dict[int, dict[str, float]] = field(default_factory=dict)
    recent: deque[Mapping[str, Any]] = field(default_factory=lambda: deque(maxlen=5))
    finish_times: deque[tuple[float, str]] = field(default_factory=lambda: deque(maxlen=4096))
    session_used: dict[str, float] = field(default_factory=dict)
    _candidates: dict[str, Mapping[str, Any]] = field(default_factory=dict)

    def configure(self, config: Mapping[str, Any] | None) -> None:
        """Take the budget limits and run slots from the event log's "config" document (if there is one)."""
        if config:
            self.budget = dict(config.get("budget") or {})
            slots = (config.get("run") or {}).get("workers", {}).get("slots")
            self.slots = int(slots) if isinstance(slots, int) else None

    def snapshot(self) -> RunStats:
        """A copy that later feeding does not change (each container copied; the events' payloads are shared, as
        nothing changes them), for a reader while the original keeps being fed."""
        return replace(self, dispatched=Counter(self.dispatched), done=Counter(self.done),
                       errors=Counter(self.errors), open_calls=dict(self.open_calls), actual=dict(self.actual),
                       proposal_failed=Counter(self.proposal_failed), verdicts=dict(self.verdicts),
                       commits=list(self.commits), scores={v: dict(s) for v, s in self.scores.items()},
                       recent=deque(self.recent, maxlen=self.recent.maxlen),
                       finish_times=deque(self.finish_times, maxlen=self.finish_times.maxlen),
                       session_used=dict(self.session_used), _candidates=dict(self._candidates))

    def feed(self, events: Iterable[Event]) -> None:
        """Take events in log order (each one once)."""
        for event in events:
            self.first_at = event.at if self.first_at is None else self.first_at
            if self.session_at is None:
                self.session_at = event.at
            self.last_at = event.at
            handler = getattr(self, f"_on_{event.kind}", None)
            if handler is not None:
                handler(event)
            self.seq = event.seq

    # -- handlers -------------------------------------------------------------------------------------------
    def _on_dispatch(self, event: Event) -> None:
        kind = str(event.payload["kind"])
        self.dispatched[kind] += 1
        self.open_calls[int(event.payload["call"])] = (kind, dict(event.payload.get("reserved", {})))

    def _on_done(self, event: Event) -> None:
        kind = str(event.payload["kind"])
        self.done[kind] += 1
        self.open_calls.pop(int(event.payload["call"]), None)
        for name, amount in dict(event.payload.get("actual", {})).items():
            if name in self.actual:
                self.actual[name] += float(amount)
        if event.payload.get("error") not in (None, NEVER_STARTED):  # a call given back before it ran: no error
            self.errors[kind] += 1
        if kind in RUN_KINDS:
            self.run_seconds += float(event.payload.get("seconds") or 0.0)
        self.finish_times.append((event.at, kind))

    def _on_proposal(self, event: Event) -> None:
        self.proposals += 1

    def _on_proposal_failed(self, event: Event) -> None:
        self.proposal_failed[str(event.payload.get("kind", "failed"))] += 1

    def _on_decision(self, event: Event) -> None:
        self.verdicts[str(event.payload["diff_id"])] = str(event.payload["outcome"])
        if event.payload["outcome"] not in _FINAL_SKIP:
            self.recent.append(event.payload)

    def _on_step(self, event: Event) -> None:
        self.steps += 1
        for candidate in event.payload.get("candidates", []):
            evidence = candidate.get("evidence", {})
            self._candidates[str(candidate["diff"]["id"])] = evidence
            base = evidence.get("base_version")
            if base is not None:
                known = self.scores.setdefault(int(base), {})
                for task, base_score, _ in evidence.get("rows", []):
                    known[str(task)] = float(base_score)

    def _on_commit(self, event: Event) -> None:
        version, diff = int(event.payload["version"]), str(event.payload["diff"])
        self.commits.append(Commit(event.at, version, diff, self.done["rollouts"]))
        evidence = self._candidates.get(diff)
        if evidence is not None and evidence.get("base_version") == version - 1:
            known = self.scores.setdefault(version, {})
            for task, _, candidate in evidence.get("rows", []):
                known.setdefault(str(task), float(candidate))

    def _on_resumed(self, event: Event) -> None:
        self.resumes += 1
        self.session_at = event.at
        self.actual = self.used()  # calls a dead process left open stay charged their reservation (as resume does)
        self.open_calls.clear()
        self.session_used = dict(self.actual)
        self.failed, self.finished = None, None  # a new session: only its own ending counts

    def _on_failed(self, event: Event) -> None:
        self.failed = str(event.payload.get("error", "failed"))

    def _on_finished(self, event: Event) -> None:
        self.finished = dict(event.payload)

    # -- derived numbers ------------------------------------------------------------------------------------
    def in_flight(self, kind: str) -> int:
        """Calls of `kind` dispatched but not done."""
        return sum(1 for k, _ in self.open_calls.values() if k == kind)

    def used(self) -> dict[str, float]:
        """Budget use per kind: finished calls' actual amounts plus open calls' reservations (as a resume counts)."""
        used = dict(self.actual)
        for _, reserved in self.open_calls.values():
            for name, amount in reserved.items():
                if name in used:
                    used[name] += float(amount)
        return used

    def limit(self, kind: str) -> float | None:
        value = self.budget.get(kind)
        return None if value is None else float(value)

    def rate(self, kinds: Iterable[str], now: float, window: float = 10.0) -> float:
        """Finished calls of `kinds` per second over the last `window` seconds (or the session, if shorter)."""
        wanted = set(kinds)
        start = max(now - window, self.session_at if self.session_at is not None else now)
        span = now - start
        count = sum(1 for at, kind in self.finish_times if at >= start and kind in wanted)
        return count / span if span > 1e-6 else 0.0

    def rate_limit(self) -> float | None:
        """The most run calls per second the run slots allow at the measured mean call time (None if unknown)."""
        calls = sum(self.done[k] for k in RUN_KINDS)
        if not self.slots or calls == 0 or self.run_seconds <= 0:
            return None
        return self.slots / (self.run_seconds / calls)

    def outcome_counts(self) -> Counter[str]:
        """Final verdicts, one per diff (its latest), plus proposals that never became a diff, by reason."""
        counts = Counter(v for v in self.verdicts.values() if v not in _FINAL_SKIP)
        counts["tabu"] += self.proposal_failed["tabu_skips"]
        if counts["tabu"] == 0:
            del counts["tabu"]
        return counts

    def pending(self) -> int:
        """Diffs whose latest verdict sends them back for more evidence."""
        return sum(1 for v in self.verdicts.values() if v in _FINAL_SKIP)

    def val_rewards(self) -> dict[int, float]:
        """Estimated validation reward per version (only versions the gate scored)."""
        return {v: sum(s.values()) / len(s) for v, s in sorted(self.scores.items()) if s}

    def val_history(self) -> list[float]:
        """Validation rewards in commit order: version 0, then each committed version the gate scored."""
        rewards = self.val_rewards()
        versions = [0, *(c.version for c in self.commits)]
        return [rewards[v] for v in versions if v in rewards]

    def elapsed(self, now: float, wall_before: float = 0.0) -> float:
        """Run time: earlier sessions' wall time plus this session's."""
        return wall_before + (now - self.session_at if self.session_at is not None else 0.0)

    def eta(self, now: float, wall_before: float = 0.0) -> float | None:
        """Seconds until the first limited budget runs out at this session's average pace (None if unknown)."""
        session = now - self.session_at if self.session_at is not None else 0.0
        if session <= 0:
            return None
        used, guesses = self.used(), []
        for kind in LIMITS[:-1]:
            limit = self.limit(kind)
            pace = (used[kind] - self.session_used.get(kind, 0.0)) / session
            if limit is not None and pace > 0:
                guesses.append(max(0.0, limit - used[kind]) / pace)
        wall = self.limit("wall_time")
        if wall is not None:
            guesses.append(max(0.0, wall - self.elapsed(now, wall_before)))
        return min(guesses) if guesses else None

    def state(self) -> str:
        """"finished", "failed" or "unfinished", from the events alone."""
        if self.finished is not None:
            return "finished" if self.finished.get("ok", True) else "failed"
        return "failed" if self.failed is not None else "unfinished"


def sparkline(values: Iterable[float], width: int = 30) -> str:
    """Rewards in [0, 1] as block characters (the last `width` values)."""
    items = list(values)[-width:]
    return "".join(SPARKS[min(len(SPARKS) - 1, max(0, math.floor(v * len(SPARKS))))] for v in items)
