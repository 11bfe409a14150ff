"""A small synchronous driver that trains the reference world's skill with the optimizer and the store.

It is the loop the demo and the benchmarks share: each round, every worker proposes an edit against its
snapshot of the skill (snapshots refresh once the head is `lag` versions ahead, so stale diffs really happen),
the edit is scored against its base on the validation split, the aggregator decides, and the commit path
writes. Held diffs (rechecks after a rebase) are re-scored on the new head and come back next round.
It is a test fixture, not the runtime: `evolve()` is.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from agentgrad.core.artifact import default_layer
from agentgrad.core.decision import Decision, Outcome
from agentgrad.core.diff import Diff, apply
from agentgrad.core.evidence import Evidence
from agentgrad.core.rebase import Conflict, rebase
from agentgrad.errors import InvalidProposalError
from agentgrad.optim.aggregator import Aggregator, StepResult
from agentgrad.optim.base import Candidate, Context, Head
from agentgrad.optim.tabu import TabuState, is_tabu
from agentgrad.store.commit import commit_step
from agentgrad.store.sqlite import SQLiteStore
from agentgrad.strategies.base import make_diff
from agentgrad.testing.world import ReferenceWorld


@dataclass
class DriverReport:
    """What a driven run did: proposals by the world's hidden kind, verdicts, and scores before and after."""

    proposals: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    accepted_kinds: Counter[str] = field(default_factory=Counter)
    skipped_tabu: int = 0
    invalid_proposals: int = 0
    val_before: float = 0.0
    val_after: float = 0.0
    test_before: float = 0.0
    test_after: float = 0.0


@dataclass
class _Worker:
    name: str
    version: int = 0
    text: str = ""


def _tabu_state(aggregator: Aggregator) -> TabuState | None:
    states = getattr(aggregator.state, "states", ())
    for state in states:
        if isinstance(state, TabuState):
            return state
    return None


class WorldDriver:
    """Drives `world` for some rounds with `workers` proposers; `on_step` sees every step's result."""

    def __init__(self, world: ReferenceWorld, store: SQLiteStore, aggregator: Aggregator, *, workers: int = 4,
                 lag: int = 2, on_step: Callable[[int, StepResult], None] | None = None) -> None:
        self.world, self.store, self.aggregator = world, store, aggregator
        self.artifact_id = world.artifact.id
        self.lag, self.on_step = lag, on_step
        store.add_artifact(world.artifact)
        self.workers = [_Worker(f"worker-{i}") for i in range(workers)]
        self.kinds: dict[str, str] = {}
        self.held: list[Candidate] = []
        self.report = DriverReport()
        self.draws = 0

    def _head(self) -> Head:
        version = self.store.head(self.artifact_id)
        artifact = self.store.artifact(self.artifact_id)
        return Head(version.number, version.text, artifact.layer or default_layer(artifact.kind), artifact.kind)

    def _score(self, base_text: str, diff: Diff, base_version: int) -> Evidence:
        val = self.world.val
        before = self.world.evaluate(base_text, val)
        after = self.world.evaluate(apply(diff, base_text), val)
        return Evidence.paired(before, after, base_version=base_version, full=True)

    def _propose(self, worker: _Worker, head: Head, round_no: int) -> Candidate | None:
        if head.version - worker.version >= self.lag or not worker.text:
            worker.version, worker.text = head.version, head.text
        failing = [t for t in self.world.train if self.world.solve(worker.text, t) < 1.0] or list(self.world.train)
        task = failing[self.draws % len(failing)]
        proposal = self.world.propose(worker.text, task, self.draws)
        self.draws += 1
        self.report.proposals[proposal.kind] += 1
        try:
            diff = make_diff(self.world.strategy, self.artifact_id, worker.version, worker.text, proposal.text,
                             author=worker.name, rationale=f"round {round_no}: fix task {task}")
        except InvalidProposalError:
            self.report.invalid_proposals += 1
            return None
        if not diff.ops:
            self.report.outcomes["no-op"] += 1
            return None
        tabu_state = _tabu_state(self.aggregator)
        if tabu_state is not None and is_tabu(tabu_state, diff):
            self.report.skipped_tabu += 1
            return None
        self.kinds[diff.id] = proposal.kind
        return Candidate(diff, self._score(worker.text, diff, worker.version))

    def _recheck(self, candidate: Candidate, head: Head) -> Candidate | None:
        moved = rebase(candidate.diff, head.text, head.version)
        if isinstance(moved, Conflict) or not moved.ops:
            self.report.outcomes["recheck-dropped"] += 1
            return None
        return Candidate(moved, self._score(head.text, moved, head.version))

    def step(self, round_no: int) -> StepResult:
        """One round: propose, score, aggregate, commit."""
        head = self._head()
        rechecked = [self._recheck(c, head) for c in self.held]
        batch = [c for c in rechecked if c is not None]
        self.held = []
        for worker in self.workers:
            candidate = self._propose(worker, head, round_no)
            if candidate is not None:
                batch.append(candidate)
        result = self.aggregator.step(batch, Context({self.artifact_id: head}))
        commit_step(self.store, result, batch)
        self.held = [c for c in result.held if c.recheck]
        self._count(result.decisions)
        if self.on_step is not None:
            self.on_step(round_no, result)
        return result

    def _count(self, decisions: tuple[Decision, ...]) -> None:
        for decision in decisions:
            self.report.outcomes[decision.outcome.value] += 1
            if decision.outcome is Outcome.ACCEPTED:
                parts = decision.parts or (decision.diff_id,)
                for part in parts:
                    self.report.accepted_kinds[self.kinds.get(part, "?")] += 1

    def run(self, rounds: int) -> DriverReport:
        """Run `rounds` rounds and fill in the scores before and after."""
        start = self.world.artifact.text
        self.report.val_before = self.world.score(start, "val")
        self.report.test_before = self.world.score(start, "test")
        for round_no in range(rounds):
            self.step(round_no)
        final = self.store.artifact(self.artifact_id).text
        self.report.val_after = self.world.score(final, "val")
        self.report.test_after = self.world.score(final, "test")
        return self.report
