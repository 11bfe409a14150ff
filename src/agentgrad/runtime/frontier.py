"""The per-example frontier: the examples that only changes the run did not commit won, and those changes.

GEPA keeps every candidate that scores best on some validation example, however it does on average, so that a
candidate which solves what nothing else solves is not lost. A run of agentgrad commits its changes to one head,
where the wins of every committed change add up; what such a frontier would keep beyond the head is the changes
that won examples no committed change won, without the evidence to be committed (too few examples like their
origin, a replication the run's versions or calls cut short, the budget's end). During the run they are kept: a
promising one is held and scored on more tasks and later heads, its evidence kept (`runtime.parking`), and the
turned-down ones serve as other candidates' fresh contexts. At its end the run lists them here, example by example
(`Result.frontier`, and a line of `Result.summary`): what more validation tasks like those examples, or a longer
run, could still teach.

A change is on the frontier when its last verdict is neither a commit nor a part of one (fused), it was not found
harmful (the acceptance test's harm check, or a revert), and it won at least `REPLICA_WINS` rows (three) where it
should act: the gain rows of the acceptance test (the focus tasks like its origin, or all rows when too few are
marked) and its replica rows (its origin task in fresh contexts, counted for that task). The examples are those it
won there that no committed change's evidence won. A change with no effect wins a row now and then by the answer
noise alone; three where it should act rarely come from noise (185 changes won an example no commit won in 64
runs of the benchmark worlds: the 161 junk ones each won at most two, and 11 of the 24 right rules three or more;
with the bar, 91% of the changes on the frontiers of 930 benchmark runs were right rules).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from agentgrad.core.decision import Decision, Outcome
from agentgrad.core.evidence import Evidence, replica_origin
from agentgrad.optim.judge import HARM, REPLICA_WINS, split
from agentgrad.store.protocol import Store

_SETTLED = (Outcome.ACCEPTED, Outcome.FUSED, Outcome.REVERTED, Outcome.DUPLICATE, Outcome.TABU)


@dataclass(frozen=True)
class FrontierEntry:
    """An example that no committed change won, and the changes not committed that won it.

    Args:
        task_id: the example (a gate task; for a replica, its origin task).
        diff_ids: the changes that won it, the most rows won first.
        wins: the rows those changes won on it, in all (a replica row in each context counts once).
    """

    task_id: str
    diff_ids: tuple[str, ...]
    wins: int

    def to_dict(self) -> dict[str, Any]:
        """The entry, JSON-ready (the CLI's ``--json``, the service, the report)."""
        return {"task_id": self.task_id, "diff_ids": list(self.diff_ids), "wins": self.wins}

    def describe(self) -> str:
        """One line: the example, its changes and the rows they won."""
        return f"{self.task_id} by {', '.join(self.diff_ids)} ({self.wins} row(s) won)"


def _won(evidence: Evidence, *, anywhere: bool = False) -> dict[str, int]:
    """The rows `evidence` won where the change should act (its gain rows and replica rows; `anywhere`: all its
    rows), per example (a replica row counted for its origin task)."""
    where = None if anywhere else split(evidence)[3] | set(evidence.replicas)
    won: dict[str, int] = {}
    for row in evidence.rows:
        if row.delta > 0 and (where is None or row.task_id in where):
            task = replica_origin(row.task_id) if row.task_id in evidence.replicas else row.task_id
            won[task] = won.get(task, 0) + 1
    return won


def _open(decision: Decision) -> bool:
    """True when a diff with this last verdict may be on the frontier: not committed, not part of a commit, not a
    copy of another diff, not harmful."""
    return decision.outcome not in _SETTLED and decision.numbers.get("harm_p", 1.0) >= HARM


def frontier(decisions: Iterable[Decision], evidence: Callable[[str], Evidence]) -> tuple[FrontierEntry, ...]:
    """The frontier of a run from its verdicts (oldest first) and the evidence stored with each diff.

    Entries come the most rows won first, then by example id; `evidence` is read only for the diffs that were
    committed and for those that may be on the frontier.
    """
    last = {decision.diff_id: decision for decision in decisions}
    committed: set[str] = set()
    for diff_id, decision in last.items():
        if decision.outcome is Outcome.ACCEPTED:
            committed.update(_won(evidence(diff_id), anywhere=True))
    by_task: dict[str, dict[str, int]] = {}
    for diff_id, decision in last.items():
        won = _won(evidence(diff_id)) if _open(decision) else {}
        if sum(won.values()) < REPLICA_WINS:
            continue
        for task, rows in won.items():
            if task not in committed:
                by_task.setdefault(task, {})[diff_id] = rows
    entries = [FrontierEntry(task, tuple(sorted(won, key=lambda d: (-won[d], d))), sum(won.values()))
               for task, won in by_task.items()]
    return tuple(sorted(entries, key=lambda e: (-e.wins, e.task_id)))


def stored_frontier(store: Store, artifact_id: str | None = None) -> tuple[FrontierEntry, ...]:
    """The frontier of the run a store holds: of one artifact's diffs, or (None) of every diff."""
    return frontier(store.decisions(artifact_id=artifact_id), store.evidence)
