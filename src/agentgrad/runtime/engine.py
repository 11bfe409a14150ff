"""The engine: the stage coroutines both runtimes share (rollout, propose, evaluate, aggregate).

The engine owns the run's mutable state (budget meter, aggregator, score cache, duration estimates, counters)
and its ports (store, event log, clock, the user's functions). The synchronous and asynchronous loops only decide
*when* to call these stages; everything a stage does is the same in both. Stale diffs and work sent back by a step
are handled in `stale.py`, and the step itself, the commit path, in `step.py`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from agentgrad.core.artifact import Artifact, Layer, content_hash
from agentgrad.core.decision import Decision, Outcome
from agentgrad.core.diff import Diff, apply, fingerprint
from agentgrad.core.evidence import Evidence
from agentgrad.core.library import Library, unpack
from agentgrad.errors import ApplyConflictError, InvalidOpError, InvalidProposalError
from agentgrad.optim.aggregator import Aggregator
from agentgrad.optim.base import Candidate, Context, Head
from agentgrad.optim.noise import NoiseEstimate
from agentgrad.optim.schedules import delta_schedule
from agentgrad.runtime.accounts import Accounts
from agentgrad.runtime.budget import Budget, Ledger
from agentgrad.runtime.calls import Caller, CallOutcome, Slots
from agentgrad.runtime.changes import MemberChanges
from agentgrad.runtime.config import RunConfig
from agentgrad.runtime.evaluator import Evaluator, UserFunctions
from agentgrad.runtime.gate import Gate
from agentgrad.runtime.health import RunHealth
from agentgrad.runtime.locality import Locality
from agentgrad.runtime.noisewatch import NoiseWatch
from agentgrad.runtime.opendiffs import OpenDiffs
from agentgrad.runtime.pacing import Pacing
from agentgrad.runtime.parking import Parking
from agentgrad.runtime.policy import ASYNC, SYNC
from agentgrad.runtime.records import Proposed, Recorder, Rollout, Snapshot
from agentgrad.runtime.runstate import RunState
from agentgrad.runtime.scheduler import DurationEstimator
from agentgrad.runtime.scorecache import ScoreCache, Scored
from agentgrad.runtime.screening import passes_screen
from agentgrad.runtime.sections import SectionOwners
from agentgrad.runtime.shown import shows_origin
from agentgrad.runtime.trim import passengers
from agentgrad.store.kinds import CHECKPOINT, EventKind
from agentgrad.store.promotion import Promotion
from agentgrad.store.sqlite import SQLiteStore
from agentgrad.strategies.base import Strategy, make_diff

Callback = Callable[[str, Mapping[str, Any]], None]


class Engine:
    """Shared stages of a run. Not thread-safe: used from one event loop.

    Collaborators, each with one job: `journal` (a `Recorder`: the event log, the counters, call ids and the clock),
    `accounts` (budgeted calls and the budget meter), `evaluator` (the calls of `run`), `gate` and `cache`
    (evidence and the score cache), `open` (the diffs without a final verdict in the store yet), `parking` (the
    candidates waiting to replicate), `pacing` (the rollouts' tasks and when they may start) and `aggregator` (the
    optimizer). State of its own: the head snapshot, the noise estimate and what each commit touched.
    """

    def __init__(self, *, tasks: Mapping[str, Any], train: Sequence[str], val: Sequence[str], artifact: Artifact,
                 strategy: Strategy, user: UserFunctions, config: RunConfig, budget: Budget, store: SQLiteStore,
                 aggregator: Aggregator, clock: Callable[[], float], callbacks: Sequence[Callback] = (),
                 library: Library | None = None) -> None:
        self.clock = clock
        self.journal = Recorder(store.journal, clock, callbacks)  # shares the store's transactions (`unit`)
        self.tasks, self.train, self.val = tasks, list(train), list(val)
        self.artifact, self.strategy, self.user, self.config = artifact, strategy, user, config
        self.library = library  # a library run: `artifact` packs these members (`agentgrad.core.library`)
        self.changes = MemberChanges(store, artifact.id) if library is not None else None  # members per version
        self.sections = SectionOwners.of(tasks, train, config.workers.rollout) if config.parallel == "sections" \
            else None
        self.store, self.aggregator = store, aggregator
        self.promotion = Promotion(max(1, config.promote_every))
        self.promotion_due = False
        self._make_calls(budget)
        self.cache = ScoreCache(self._score)
        self.delta = delta_schedule(config.acceptance.delta)
        self.pool = self.val + (self.train if config.gate.widened(len(self.val)) else [])  # tasks the gate may score
        self.gate = self._make_gate(budget)
        self.noise = NoiseEstimate()  # the answer noise seen on far rows of decided candidates (`optim.noise`)
        self.watch = NoiseWatch(self.gate.far, lambda text, task: self.cache.scores.get((content_hash(text), task)))
        self.held_out_affordable = True  # False when the budget could not set the held-out calls aside
        self.open = OpenDiffs()
        self.touched: dict[int, frozenset[str] | None] = {}  # version -> tasks its commit changed (`stale.py`)
        self.frozen_known: tuple[str, frozenset[str]] = ("", frozenset())  # (text hash, tasks): `freeze_known`
        self.policy = ASYNC if config.asynchronous else SYNC  # until a loop injects its own (`runtime.policy`)
        head = store.head(artifact.id)
        self.head = Snapshot(head.number, head.text)
        self.parking = Parking()  # candidates waiting for a fresh context to replicate in (`runtime.parking`)
        self.input_starts: Counter[str] = Counter()  # how many tasks start alike (`shows_origin`), built once
        self.pacing = Pacing(config=config, journal=self.journal, accounts=self.accounts, estimator=self.estimator,
                             gate=self.gate, cache=self.cache, open_diffs=self.open, parking=self.parking,
                             train=self.train, sections=self.sections, head=lambda: self.head,
                             policy=lambda: self.policy, earlier=self.watch.earlier,
                             reserve=self.val if self.pool != self.val else ())  # the pool takes training tasks too

    def _make_calls(self, budget: Budget) -> None:
        """The calls' side of the run: the budget's accounts, the slots, the durations seen, the run's health
        and the evaluator that makes every call of the user's functions through them."""
        config = self.config
        self.accounts = Accounts(self.journal, Ledger(budget), Caller(
            threads=config.workers.threads, timeout=config.timeout, clock=self.clock,
            inline_reward=config.inline_reward))
        self.run_slots = Slots(config.workers.run_slots)
        self.propose_slots = Slots(config.workers.propose)
        self.estimator = DurationEstimator()
        self.health = RunHealth(config.workers.run_slots, self.journal.counts)
        self.evaluator = Evaluator(tasks=self.tasks, strategy=self.strategy, user=self.user, config=config,
                                   accounts=self.accounts, slots=self.run_slots, estimator=self.estimator,
                                   journal=self.journal, health=self.health, policy=lambda: self.policy)

    def _make_gate(self, budget: Budget) -> Gate:
        """The acceptance gate on this run's pool, scoring through the cache, with the noise estimate and the
        noise watch (both built after it) read only when it judges."""
        config = self.config
        inputs = {t: str(getattr(self.tasks[t], "input", "")) for t in dict.fromkeys(self.pool + self.train)}
        return Gate(self.cache.get, self.val, config.gate, seed=config.seed, margin=config.acceptance.margin,
                    estimator=self.estimator, peek=self.cache.peek, pool=self.pool,
                    locality=Locality(inputs) if config.gate.focus else None, known=self.known_tasks,
                    noise=lambda: self.noise, earlier=lambda text, task_id: self.watch.earlier(text, task_id),
                    finish=None if budget.calls is None else config.workers.run_slots)

    # -- timing and the gate's view of the cache ------------------------------------------------------------
    def known_tasks(self, text: str) -> frozenset[str]:
        """The tasks `text` has a cached score on, for the gate's plans: live in the asynchronous runtime; in the
        synchronous one as `freeze_known` saw them (so plans never depend on the order calls finish in)."""
        if self.policy.live_cache:
            return self.cache.tasks(text)
        digest, tasks = self.frozen_known
        return tasks if digest == content_hash(text) else frozenset()

    def freeze_known(self) -> None:
        """Note the head's cached tasks now, for `known_tasks` in the synchronous runtime."""
        self.frozen_known = (content_hash(self.head.text), self.cache.tasks(self.head.text))

    # -- calling run -----------------------------------------------------------------------------------------
    async def _score(self, text: str, task_id: str) -> Scored:
        """A gate call on a cache miss (`Evaluator.score`), noted by the noise watch."""
        scored = await self.evaluator.score(text, task_id)
        self.watch.scored(text, task_id, scored.score)
        return scored

    # -- rollouts and proposals ------------------------------------------------------------------------------
    def idle(self) -> bool:
        """True when the rollout budget is unlimited and two epochs of rollouts over the training tasks, and one
        over the validation tasks rollouts may take (`Pacing.reserve`), since the last proposal or final verdict
        brought nothing: the loops then stop exploring (`note_idle_stop`) instead of spinning."""
        threshold = max(2 * len(self.train) + len(self.pacing.reserve), 2 * self.config.workers.rollout)
        return self.accounts.meter.budget.rollouts is None and self.journal.counts["idle_rollouts"] >= threshold

    def note_idle_stop(self) -> None:
        """Exploring stopped because the run is `idle`: counted and logged once (an "idle" event)."""
        if not self.journal.counts["idle_stops"]:
            self.journal.counts["idle_stops"] += 1
            self.journal.counts["idle_stop_rollouts"] = self.journal.counts["idle_rollouts"]
            self.journal.emit(EventKind.IDLE, {"rollouts_without_a_proposal": self.journal.counts["idle_rollouts"]})

    async def rollout(self, worker: str, snapshot: Snapshot, task_id: str,
                      refresh: Callable[[Snapshot], Snapshot] | None = None) -> Rollout:
        """Run the agent with `snapshot` on a training task and score it. With `refresh`, the snapshot is
        `refresh(snapshot)` at the moment the run slot is granted (the rollout records the one it used)."""
        reused = self.pacing.reused_rollout(worker, snapshot if refresh is None else refresh(snapshot), task_id)
        if reused is not None:
            return reused
        used = [snapshot]

        def fresh() -> str:
            if refresh is not None:
                used[0] = refresh(used[0])
            return used[0].text

        self.pacing.rollout_started(task_id)
        try:  # the task stays busy until its score is known (a worker woken at its end must not repeat it)
            outcome = await self.evaluator.hedged_run("rollouts", snapshot.text, task_id,
                                                      late=None if refresh is None else fresh)
            snapshot = used[0]
            reward = await self.evaluator.reward(task_id, outcome)
            self.cache.put(snapshot.text, task_id, reward)
        finally:
            self.pacing.rollout_ended(task_id)
        self.watch.scored(snapshot.text, task_id, reward)
        self.journal.log_soon(EventKind.ROLLOUT, {"task": task_id, "version": snapshot.version, "reward": reward,
                                          "worker": worker})
        self.journal.counts["rollouts"] += 1
        self.journal.counts["idle_rollouts"] += 1
        return Rollout(worker, task_id, snapshot, outcome.value if outcome.ok else None, reward, outcome.error)

    async def propose(self, rollout: Rollout) -> Proposed | None:
        """Ask for an edit from a failed rollout; None when there is nothing to evaluate (counted and logged).

        The diff's id is ``p`` and the number of the propose call, unique in the run directory across resumes.
        """
        if rollout.reward >= 1.0:
            self.journal.counts["passed_rollouts"] += 1
            return None
        args = (self.strategy.render(rollout.snapshot.text), self.tasks[rollout.task_id], rollout.output,
                rollout.reward)
        diff_id = f"p{self.journal.calls:06d}"  # the id of the call `budgeted` reserves next: unique across resumes
        outcome = await self.accounts.budgeted("proposals", self.user.propose, args, self.propose_slots,
                                               rollout.task_id)
        about = {"task": rollout.task_id, "worker": rollout.worker}
        diff = self.diff_from(outcome, rollout.snapshot, diff_id, rollout.worker, f"from task {rollout.task_id}",
                              about)
        if diff is not None:
            self.pacing.note_origin(diff.id, rollout.task_id)
        return None if diff is None else Proposed(diff, rollout.snapshot, rollout)

    def diff_from(self, outcome: CallOutcome, base: Snapshot, diff_id: str, author: str, rationale: str,
                  about: Mapping[str, Any]) -> Diff | None:
        """The diff a proposal asks for, logged as a proposal; None (counted, logged) for anything unusable."""
        self.health.proposed(None if outcome.ok else str(outcome.error))
        if not outcome.ok:
            self._proposal_failed("proposal_errors", about, str(outcome.error))
            return None
        proposal = outcome.value
        if not isinstance(proposal, (str, Mapping, list, tuple)):
            proposal = getattr(proposal, "text", proposal)
        try:
            made = make_diff(self.strategy, self.artifact.id, base.version, base.text, proposal, author=author,
                             rationale=rationale)
        except (InvalidProposalError, InvalidOpError, ApplyConflictError) as exc:
            self._proposal_failed("invalid_proposals", about, str(exc))
            return None
        if not made.ops:
            self._proposal_failed("no_op_proposals", about, "the proposal changes nothing")
            return None
        diff = replace(made, id=diff_id)
        return diff if self._admitted(diff, about) else None

    def _admitted(self, diff: Diff, about: Mapping[str, Any]) -> bool:
        """Log a new diff as a proposal and hold it open, unless it repeats a change turned down or in flight; a
        diff outside the trust region is refused at once, before any evaluation is spent on it (and, in
        section-parallel mode, a diff that edits another worker's section)."""
        refusal = None if self.sections is None else self.sections.refusal(diff)
        if refusal is not None:
            self._proposal_failed("outside_section", about, refusal)
            return False
        if self.aggregator.refused_before(diff):
            self._proposal_failed("tabu_skips", about, "the same change was already turned down")
            return False
        twin = self.open.twin(diff)
        if twin is not None:
            self._proposal_failed("in_flight_duplicates", about, f"the same change is already being evaluated as "
                                                                 f"{twin}")
            return False
        self.journal.counts["proposals"] += 1
        self.journal.counts["idle_rollouts"] = 0
        self.hold_open([diff])
        self.journal.emit(EventKind.PROPOSAL, {"diff": diff.to_dict(), **about})
        region = self.config.trust_region
        too_large = region.outside(diff)
        if too_large is not None:
            self.journal.counts["too_large"] += 1
            self.record_verdict(diff, Evidence(()), Outcome.TOO_LARGE, "trust_region",
                                "outside the trust region: " + too_large, region.numbers(diff))
        return too_large is None

    def hold_open(self, diffs: Sequence[Diff], *, first: bool = True) -> None:
        """Note diffs with no final verdict yet (the same change proposed meanwhile is skipped; see `OpenDiffs`)."""
        self.open.hold(diffs, first=first)

    def drop_open(self, diff_id: str, *, final: bool = True) -> None:
        """A diff got its verdict: it is no longer open (a candidate held for more evidence, not `final`, is held
        again at once). Only a `final` verdict counts as a proposal `judged`, makes the rollouts made meanwhile
        count for no `idle` and wakes the rollouts waiting for a verdict (`Pacing.settled`): the split of the calls
        prices a proposal at the gate calls per judged proposal, and counting each hold of a replicating candidate
        too priced proposals at a fraction of their cost (family 4242 drawn9: 15 judged of 6 proposals, 5.4 calls
        each). A held diff keeps the version it was born on (`OpenDiffs.drop`)."""
        self.pacing.forget_origin(diff_id)
        if self.open.drop(diff_id, final=final) is not None and final:
            self.journal.counts["judged"] += 1
            self.journal.counts["idle_rollouts"] = 0
            self.pacing.settled()

    def _proposal_failed(self, counter: str, about: Mapping[str, Any], error: str) -> None:
        self.journal.counts[counter] += 1
        safe = error[:300].encode("utf-8", "backslashreplace").decode("utf-8")
        if counter == "invalid_proposals":
            self.health.unusable(safe)
        self.journal.emit(EventKind.PROPOSAL_FAILED, {"kind": counter, **about, "error": safe})

    # -- the gate --------------------------------------------------------------------------------------------
    async def evaluate(self, proposed: Proposed, *, full: bool = False) -> Candidate | None:
        """Screen, then score the candidate against its base on validation tasks."""
        diff, base = proposed.diff, proposed.snapshot
        cand_text = apply(diff, base.text)
        origin = proposed.origin
        if self.config.gate.screen and origin is not None and not full and \
                not await passes_screen(self, diff, base, cand_text, origin):
            return None
        if origin is not None and not full and len(diff.ops) > 1 and self.config.gate.trim:
            diff = await self._trim(diff, base, origin)
            cand_text = apply(diff, base.text)
        evidence = await self.gate.evidence(diff.id, base.text, base.version, cand_text,
                                            delta=self.look_delta(base.version, 1), full=full,
                                            windowed=self.policy.windowed,
                                            origin=None if origin is None else origin.task_id)
        self.journal.counts["gated"] += 1
        origin_id = None if origin is None else origin.task_id
        return Candidate(diff, evidence, origin=origin_id, shows_origin=self.shows_origin(diff, origin_id))

    async def before(self, base: Snapshot, origin: Rollout) -> float:
        """The base's score on the origin task: the rollout's, or the head's for a proposal rebased onto it (a commit
        since may have solved the task: a screen against the old score would credit the change with it)."""
        return origin.reward if origin.snapshot == base else await self.gate.score(base.text, origin.task_id)

    async def _trim(self, diff: Diff, base: Snapshot, origin: Rollout) -> Diff:
        """`diff` without the ops its origin task does not need (`runtime.trim`), on `base` (the snapshot it was
        written on, or the head it was rebased onto: then the base is scored on the origin first); the trimmed diff
        keeps the id, and a proposal event with ``trimmed`` (the ops taken out) records it."""
        trimmed, dropped = await passengers(diff, base.text, origin.task_id, await self.before(base, origin),
                                            self.gate.pair)
        if dropped:
            gone = "; ".join(repr(diff.ops[i].new or diff.ops[i].old) for i in dropped)
            trimmed = replace(trimmed, rationale=f"{diff.rationale} (taken out, not needed on task {origin.task_id}: "
                                                 f"{gone})".strip())
            self.journal.counts["trimmed_ops"] += len(dropped)
            self.open.drop(diff.id)
            self.hold_open([trimmed])
            self.journal.emit(EventKind.PROPOSAL, {"diff": trimmed.to_dict(), "task": origin.task_id,
                                                   "worker": origin.worker,
                                                   "trimmed": [diff.ops[i].to_dict() for i in dropped]})
        return trimmed

    def shows_origin(self, diff: Diff, origin: str | None) -> bool:
        """`runtime.shown.shows_origin` over the run's tasks."""
        return shows_origin(diff, origin, self.tasks, self.input_starts)

    def look_delta(self, version: int, look: int) -> float:
        """The δ that look number `look` at a candidate on head `version` is tested at."""
        return self.config.acceptance.look_delta(self.delta(version), look)

    def record_verdict(self, diff: Diff, evidence: Evidence, outcome: Outcome, stage: str, reason: str,
                       numbers: Mapping[str, float] | None = None) -> Decision:
        """Record a verdict reached outside the aggregator (gate screen, stale before evaluation, unfinished)."""
        decision = Decision(diff.id, diff.artifact_id, outcome, stage, reason, dict(numbers or {}), fingerprint(diff))
        with self.journal.unit():  # the verdict and its event: one transaction
            self.store.record(diff, evidence, decision)
            self.journal.emit(EventKind.DECISION, decision.to_dict())
        self.aggregator.observe([decision], self.context())
        self.drop_open(diff.id)
        return decision

    def close_open(self, reason: str) -> int:
        """Record DEFERRED on every diff still without a final verdict (a resumed run evaluates them); how many."""
        pending = list(self.open)
        for diff in pending:
            self.record_verdict(diff, Evidence(()), Outcome.DEFERRED, "gate", reason)
        return len(pending)

    # -- aggregation -----------------------------------------------------------------------------------------
    def context(self) -> Context:
        """The heads the optimizer sees now."""
        layer = self.artifact.layer
        assert layer is not None
        changes = {} if self.changes is None else self.changes.recent(self.head.version)
        heads = {self.artifact.id: Head(self.head.version, self.head.text, layer, self.artifact.kind, changes)}
        if self.library is not None:  # each member's head, at the library's version (governance reads its layer)
            texts = unpack(self.head.text)
            heads.update({m.id: Head(self.head.version, texts[m.id], m.layer or Layer.L2, m.kind)
                          for m in self.library})
        return Context(heads, now=self.journal.elapsed(), noise=self.noise)

    def checkpoint(self, wall_time: float | None = None) -> None:
        """Write the resumable state (`state_dict`; the elapsed time, or `wall_time` when given), unless a step
        is half done (a step writes its checkpoint in its own transaction, when it is whole)."""
        if not self.journal.in_step:
            self.journal.events.put(CHECKPOINT, self.state_dict(wall_time))

    def state_dict(self, wall_time: float | None = None) -> dict[str, Any]:
        """The run's resumable state, one `RunState` (its collaborators' state dicts and the journal's counters)."""
        journal = self.journal
        return RunState(journal.steps, journal.events.last_seq(), journal.calls,
                        journal.elapsed() if wall_time is None else wall_time, dict(journal.counts), self.promotion_due,
                        self.aggregator.state_dict(), self.estimator.state_dict(), self.promotion.state_dict(),
                        self.noise.to_dict()).to_dict()

    def load_state_dict(self, data: Mapping[str, Any]) -> int:
        """Restore a `state_dict()` (a checkpoint) and return the log sequence number it covers; `StateDictError`
        if it is malformed (checked whole before anything changes; the aggregator's is loaded first)."""
        state = RunState.from_dict(data)
        noise = NoiseEstimate.load(state.noise)
        self.aggregator.load_state_dict(state.aggregator)
        self.estimator.load_state_dict(state.estimator)
        self.promotion.load_state_dict(state.promotion)
        self.noise, self.promotion_due = noise, state.promotion_due
        self.journal.counts.clear()
        self.journal.counts.update(state.counts)
        self.journal.steps, self.journal.wall_before, self.journal.calls = state.step, state.wall_time, state.calls
        return state.seq
