"""The engine: the stage coroutines both runtimes share (rollout, propose, evaluate, aggregate).

The engine owns the run's mutable state (budget meter, aggregator, score cache, duration estimates, counters)
and its ports (store, event log, clock, the user's functions). The synchronous and asynchronous loops only decide
*when* to call these stages; everything a stage does is the same in both.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from agentgrad.core.artifact import Artifact, content_hash
from agentgrad.core.decision import Decision, Outcome
from agentgrad.core.diff import Diff, apply, fingerprint
from agentgrad.core.evidence import Evidence
from agentgrad.core.rebase import Conflict, rebase
from agentgrad.errors import InvalidProposalError, RunFailedError
from agentgrad.optim.aggregator import Aggregator, StepResult
from agentgrad.optim.base import Candidate, Context, Head
from agentgrad.optim.schedules import delta_schedule
from agentgrad.optim.tabu import TabuState, is_tabu
from agentgrad.runtime.budget import Budget, Meter, OutOfBudget
from agentgrad.runtime.calls import Caller, CallOutcome
from agentgrad.runtime.config import RunConfig, StalePolicy
from agentgrad.runtime.gate import Gate
from agentgrad.runtime.scheduler import DurationEstimator, seeded_order
from agentgrad.runtime.scorecache import ScoreCache
from agentgrad.store.commit import commit_step
from agentgrad.store.events import EventLog
from agentgrad.store.sqlite import SQLiteStore
from agentgrad.strategies.base import Strategy, make_diff

Callback = Callable[[str, Mapping[str, Any]], None]


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
    """A diff made from a rollout, on its way to the gate."""

    diff: Diff
    snapshot: Snapshot
    origin: Rollout | None


@dataclass(frozen=True)
class UserFunctions:
    """The user's integration points: `run`, `propose`, `reward`, and the optional stale-diff `repair`."""

    run: Callable[..., Any]
    propose: Callable[..., Any]
    reward: Callable[..., Any]
    repair: Callable[..., Any] | None = None


class Engine:
    """Shared stages of a run. Not thread-safe: used from one event loop."""

    def __init__(self, *, tasks: Mapping[str, Any], train: Sequence[str], val: Sequence[str], artifact: Artifact,
                 strategy: Strategy, user: UserFunctions, config: RunConfig, budget: Budget, store: SQLiteStore,
                 events: EventLog, aggregator: Aggregator, clock: Callable[[], float],
                 callbacks: Sequence[Callback] = ()) -> None:
        self.tasks, self.train, self.val = tasks, list(train), list(val)
        self.artifact, self.strategy, self.user, self.config = artifact, strategy, user, config
        self.store, self.events, self.aggregator, self.clock = store, events, aggregator, clock
        self.callbacks = list(callbacks)
        self.meter = Meter(budget)
        self.caller = Caller(threads=config.workers.threads, timeout=config.timeout, clock=clock)
        self.slots = anyio.Semaphore(config.workers.run_slots)
        self.estimator = DurationEstimator()
        self.cache = ScoreCache(self._score_uncached)
        self.delta = delta_schedule(config.acceptance.delta)
        self.gate = Gate(self.cache.get, self.val, config.gate, seed=config.seed,
                         margin=config.acceptance.margin, estimator=self.estimator)
        self.counts: Counter[str] = Counter()
        self.first_run_error: str | None = None
        self.calls = 0
        self.steps = 0
        self.started = clock()
        self.wall_before = 0.0
        head = store.head(artifact.id)
        self.head = Snapshot(head.number, head.text)

    # -- events and budget -------------------------------------------------------------------------------------
    def emit(self, kind: str, payload: Mapping[str, Any]) -> None:
        """Log an event durably, then tell the callbacks."""
        self.events.append(kind, payload)
        for callback in self.callbacks:
            callback(kind, payload)

    def elapsed(self) -> float:
        """Wall time of this run so far, over resumes."""
        return self.wall_before + self.clock() - self.started

    def time_left(self) -> float:
        """Seconds until the wall-time budget runs out (inf when unlimited)."""
        return self.meter.budget.limit("wall_time") - self.elapsed()

    def _amounts(self, kind: str) -> dict[str, float]:
        amounts = {kind: 1.0}
        if self.meter.budget.tokens is not None:
            amounts["tokens"] = float(self.meter.budget.tokens_per_call)
        if self.meter.budget.cost is not None:
            amounts["cost"] = float(self.meter.budget.cost_per_call)
        return amounts

    def reserve(self, kind: str) -> tuple[int, dict[str, float]]:
        """Reserve one call of `kind` (and its token and cost bound) and log the dispatch; or raise OutOfBudget."""
        amounts = self._amounts(kind)
        if self.time_left() <= 0 or not self.meter.reserve(amounts):
            raise OutOfBudget(kind)
        call_id = self.calls
        self.calls += 1
        self.events.append("dispatch", {"call": call_id, "kind": kind, "reserved": amounts})
        return call_id, amounts

    def settle(self, call_id: int, kind: str, reserved: dict[str, float], outcome: CallOutcome,
               task_id: str) -> None:
        """Turn a reservation into use and log the result."""
        actual = {kind: 1.0, "tokens": float(outcome.usage.tokens), "cost": outcome.usage.cost}
        self.meter.settle(reserved, actual)
        self.events.append("done", {"call": call_id, "kind": kind, "task": task_id, "actual": actual,
                                    "error": outcome.error, "seconds": outcome.seconds})

    # -- calling run ---------------------------------------------------------------------------------------------
    async def call_run(self, kind: str, text: str, task_id: str) -> CallOutcome:
        """One budgeted, slot-bounded call of the user's `run` on `task_id` with `text` rendered."""
        call_id, reserved = self.reserve(kind)
        async with self.slots:
            outcome = await self.caller.run(self.user.run, self.strategy.render(text), self.tasks[task_id])
        self.settle(call_id, kind, reserved, outcome, task_id)
        if self.estimator.observe(task_id, outcome.seconds):
            self.counts["stragglers"] += 1
        self._check_run_health(outcome)
        return outcome

    def _check_run_health(self, outcome: CallOutcome) -> None:
        if outcome.ok:
            self.counts["run_ok"] += 1
            return
        self.counts["run_errors"] += 1
        self.first_run_error = self.first_run_error or outcome.error
        limit = max(8, 2 * self.config.workers.run_slots)
        if self.counts["run_ok"] == 0 and self.counts["run_errors"] >= limit:
            raise RunFailedError(f"the first {self.counts['run_errors']} calls of run all failed; the first error "
                                 f"was: {self.first_run_error}")

    async def _score_uncached(self, text: str, task_id: str) -> float:
        outcome = await self.call_run("gate_evals", text, task_id)
        if not outcome.ok:
            return 0.0
        return await self.caller.reward(self.user.reward, self.tasks[task_id], task_id, outcome.value)

    # -- stages --------------------------------------------------------------------------------------------------
    def pick_task(self, index: int) -> str:
        """The training task for rollout number `index` (epochs of a seeded shuffle)."""
        epoch, position = divmod(index, len(self.train))
        return seeded_order(self.train, seed=self.config.seed, salt=f"epoch{epoch}")[position]

    async def rollout(self, worker: str, snapshot: Snapshot, task_id: str) -> Rollout:
        """Run the agent with `snapshot` on a training task and score it."""
        outcome = await self.call_run("rollouts", snapshot.text, task_id)
        reward = 0.0
        if outcome.ok:
            reward = await self.caller.reward(self.user.reward, self.tasks[task_id], task_id, outcome.value)
        self.cache.put(snapshot.text, task_id, reward)
        self.counts["rollouts"] += 1
        return Rollout(worker, task_id, snapshot, outcome.value if outcome.ok else None, reward, outcome.error)

    async def propose(self, rollout: Rollout, diff_id: str) -> Proposed | None:
        """Ask for an edit from a failed rollout; None when there is nothing to evaluate (counted)."""
        if rollout.reward >= 1.0:
            self.counts["passed_rollouts"] += 1
            return None
        call_id, reserved = self.reserve("proposals")
        rendered = self.strategy.render(rollout.snapshot.text)
        outcome = await self.caller.call(self.user.propose, rendered, self.tasks[rollout.task_id],
                                         rollout.output, rollout.reward)
        self.settle(call_id, "proposals", reserved, outcome, rollout.task_id)
        if not outcome.ok:
            self._proposal_failed("proposal_errors", rollout, str(outcome.error))
            return None
        proposal = outcome.value
        proposal = getattr(proposal, "text", proposal) if not isinstance(proposal, (str, dict, list)) else proposal
        try:
            diff = make_diff(self.strategy, self.artifact.id, rollout.snapshot.version, rollout.snapshot.text,
                             proposal, author=rollout.worker, rationale=f"from task {rollout.task_id}")
        except InvalidProposalError as exc:
            self._proposal_failed("invalid_proposals", rollout, str(exc))
            return None
        if not diff.ops:
            self.counts["no_op_proposals"] += 1
            return None
        diff = Diff(diff.artifact_id, diff.base_version, diff.ops, diff.author, diff.rationale, id=diff_id)
        if self._is_tabu(diff):
            self.counts["tabu_skips"] += 1
            return None
        self.counts["proposals"] += 1
        self.emit("proposal", {"diff": diff.to_dict(), "task": rollout.task_id, "worker": rollout.worker})
        return Proposed(diff, rollout.snapshot, rollout)

    def _proposal_failed(self, counter: str, rollout: Rollout, error: str) -> None:
        self.counts[counter] += 1
        self.emit("proposal_failed", {"kind": counter, "task": rollout.task_id, "worker": rollout.worker,
                                      "error": error[:300]})

    def _is_tabu(self, diff: Diff) -> bool:
        for state in getattr(self.aggregator.state, "states", ()):
            if isinstance(state, TabuState):
                return is_tabu(state, diff)
        return False

    # -- the gate ------------------------------------------------------------------------------------------------
    def reanchor(self, proposed: Proposed) -> Proposed | None:
        """Move a diff made on an older snapshot onto the current head before it is evaluated.

        Within the lag budget (or with the KEEP policy) it is rebased; otherwise, or on a conflict, DISCARD drops
        it as stale (recorded) and REPAIR asks the repair callback (not here: see `repair`).
        """
        head = self.head
        lag = head.version - proposed.diff.base_version
        if lag <= 0:
            return proposed
        keep = self.config.staleness.policy is StalePolicy.KEEP
        if lag <= self.config.staleness.alpha_max or keep:
            moved = rebase(proposed.diff, head.text, head.version)
            if isinstance(moved, Diff) and moved.ops:
                self.counts["rebased_before_gate"] += 1
                return Proposed(moved, head, proposed.origin)
            reason = moved.reason if isinstance(moved, Conflict) else "the head already has its effect"
        else:
            reason = f"lag {lag} > alpha {self.config.staleness.alpha_max}"
        self.record_verdict(proposed.diff, Evidence(()), Outcome.STALE, "gate", f"stale before evaluation: {reason}")
        return None

    async def evaluate(self, proposed: Proposed, *, full: bool = False) -> Candidate | None:
        """Screen, then score the candidate against its base on validation tasks."""
        diff, base = proposed.diff, proposed.snapshot
        cand_text = apply(diff, base.text)
        origin = proposed.origin
        if self.config.gate.screen and origin is not None and not full and origin.snapshot == base:
            passed, score = await self.gate.screen(origin.reward, cand_text, origin.task_id)
            if not passed:
                evidence = Evidence.paired({origin.task_id: origin.reward}, {origin.task_id: score},
                                           base_version=base.version)
                self.counts["screened_out"] += 1
                self.record_verdict(diff, evidence, Outcome.REJECTED, "gate",
                                    "screened out: it does not beat the base on the task it was proposed for")
                return None
        evidence = await self.gate.evidence(diff.id, base.text, base.version, cand_text,
                                            delta=self.delta(base.version), full=full)
        self.counts["gated"] += 1
        return Candidate(diff, evidence)

    def record_verdict(self, diff: Diff, evidence: Evidence, outcome: Outcome, stage: str, reason: str) -> None:
        """Record a verdict reached outside the aggregator (gate screen, stale before evaluation)."""
        decision = Decision(diff.id, diff.artifact_id, outcome, stage, reason, {}, fingerprint(diff))
        self.store.record(diff, evidence, decision)
        self.aggregator.observe([decision], self.context())
        self.emit("decision", decision.to_dict())

    # -- aggregation ---------------------------------------------------------------------------------------------
    def context(self) -> Context:
        """The heads the optimizer sees now."""
        layer = self.artifact.layer
        assert layer is not None
        return Context({self.artifact.id: Head(self.head.version, self.head.text, layer, self.artifact.kind)},
                       now=self.elapsed())

    def aggregate(self, candidates: Sequence[Candidate]) -> StepResult:
        """One optimizer step on `candidates`, committed; the step's inputs are logged for replay."""
        ctx = self.context()
        self.emit("step", {"step": self.steps, "now": ctx.now, "head": self.head.version,
                           "head_hash": content_hash(self.head.text),
                           "candidates": [candidate_to_dict(c) for c in candidates]})
        result = self.aggregator.step(candidates, ctx)
        versions = commit_step(self.store, result, candidates)
        if versions:
            self.head = Snapshot(versions[-1].number, versions[-1].text)
        for decision in result.decisions:
            self.counts[f"decision_{decision.outcome.value}"] += 1
            self.emit("decision", decision.to_dict())
        for version in versions:
            self.emit("commit", {"artifact": version.artifact_id, "version": version.number,
                                 "diff": version.diff_id})
        self.steps += 1
        self.checkpoint()
        return result

    def checkpoint(self) -> None:
        """Write the resumable state (aggregator, estimator, counters, steps, elapsed time)."""
        self.events.put("checkpoint", {
            "step": self.steps, "seq": self.events.last_seq(), "aggregator": self.aggregator.state_dict(),
            "estimator": self.estimator.state_dict(), "counts": dict(self.counts), "calls": self.calls,
            "wall_time": self.elapsed()})


def candidate_to_dict(candidate: Candidate) -> dict[str, Any]:
    """A JSON-ready candidate, for the step log."""
    return {"diff": candidate.diff.to_dict(), "evidence": candidate.evidence.to_dict(),
            "recheck": candidate.recheck, "parts": [p.to_dict() for p in candidate.parts]}


def candidate_from_dict(data: Mapping[str, Any]) -> Candidate:
    """The inverse of `candidate_to_dict`."""
    return Candidate(Diff.from_dict(data["diff"]), Evidence.from_dict(data["evidence"]), bool(data["recheck"]),
                     tuple(Diff.from_dict(p) for p in data["parts"]))


async def recheck(engine: Engine, candidate: Candidate, outcome: Outcome) -> Candidate | None:
    """Re-evaluate a held candidate on the current head (on the whole validation split for a full check)."""
    diff = candidate.diff
    base = Snapshot(diff.base_version, engine.store.version(diff.artifact_id, diff.base_version).text)
    proposed = engine.reanchor(Proposed(diff, base, None))
    if proposed is None:
        return None
    engine.counts["rechecks"] += 1
    return await engine.evaluate(proposed, full=outcome is Outcome.FULL_CHECK)


def held_outcomes(result: StepResult) -> list[tuple[Candidate, Outcome]]:
    """The held candidates of a step with the outcome that held them."""
    return [(c, result.decision_for(c.diff.id).outcome) for c in result.held]


async def held_out(engine: Engine, text: str, task_ids: Sequence[str]) -> float | None:
    """Mean reward of `text` on held-out tasks (not charged to the budget; counted as test evaluations)."""
    if not task_ids:
        return None
    scores: dict[str, float] = {}

    async def one(task_id: str) -> None:
        async with engine.slots:
            outcome = await engine.caller.run(engine.user.run, engine.strategy.render(text), engine.tasks[task_id])
        engine.counts["test_evals"] += 1
        scores[task_id] = 0.0 if not outcome.ok else await engine.caller.reward(
            engine.user.reward, engine.tasks[task_id], task_id, outcome.value)

    async with anyio.create_task_group() as group:
        for task_id in task_ids:
            group.start_soon(one, task_id)
    return sum(scores.values()) / len(scores)
