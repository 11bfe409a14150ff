"""Pacing the rollouts under one budget of calls: explore only while the judging of what is in the pipeline is
covered (`runtime.split`) and the gate is not behind.

`Pacing` is the engine's collaborator (`engine.pacing`) that picks a rollout's task (`pick_task`: a training task,
or a validation task once no training task is left to learn from, when the gate's pool takes both), decides
whether a rollout may start now (`explore_allowed`), lets an asynchronous rollout worker wait for a verdict to free
calls (`explore_turn`), and serves a rollout from the gate's own run of the same head on the same task when it has
one (`reused_rollout`: the same call, so none is made and no budget is drawn on; each kept output serves one
rollout, and counts as `reused_rollouts`)."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

import anyio

from agentgrad.core.artifact import content_hash
from agentgrad.runtime.accounts import Accounts
from agentgrad.runtime.config import RunConfig
from agentgrad.runtime.gate import Gate
from agentgrad.runtime.opendiffs import OpenDiffs
from agentgrad.runtime.parking import Parking
from agentgrad.runtime.policy import LoopPolicy
from agentgrad.runtime.records import Recorder, Rollout, Snapshot
from agentgrad.runtime.scheduler import DurationEstimator, seeded_order
from agentgrad.runtime.scorecache import ScoreCache
from agentgrad.runtime.sections import SectionOwners
from agentgrad.runtime.split import SplitFigures, may_explore, replication_reserve
from agentgrad.store.kinds import EventKind

BACKLOG = 2  # under `Budget.calls`, rollouts wait while this many times the gate workers' work is waiting
STUCK_WAITS = 25  # a rollout waiting this many turns with nothing happening meanwhile starts anyway


class _Signal:
    """Wakes every task waiting on it (`fire`), and can be waited on again afterwards; a wait lasts `timeout`
    seconds at most."""

    def __init__(self) -> None:
        self._event: anyio.Event | None = None

    def fire(self) -> None:
        if self._event is not None:
            self._event.set()
            self._event = None

    async def wait(self, timeout: float) -> None:
        if self._event is None:
            self._event = anyio.Event()
        with anyio.move_on_after(timeout):
            await self._event.wait()


@dataclass(frozen=True)
class HeadScores:
    """The head's known scores, for passing over tasks a rollout would only repeat a pass on.

    Args:
        head: the content hash of the head text.
        text: the head text.
        scores: the score cache's scores, keyed by (content hash, task id).
        earlier: `NoiseWatch.earlier`: the score of the nearest earlier head on a task when every commit since was
            for tasks far from it, else None.
    """

    head: str
    text: str
    scores: Mapping[tuple[str, str], float]
    earlier: Callable[[str, str], float | None]

    def scored(self, task_id: str) -> bool:
        """True if the head has a cached score on the task (a rollout there would be a sure repeat)."""
        return (self.head, task_id) in self.scores

    def solved(self, task_id: str) -> bool:
        """The head is known to solve the task (its cached score is 1) or, not scored there, the nearest earlier
        head with a score solved it and every commit since was for tasks far from it (`earlier`): a rollout there
        would most likely pass and propose nothing. Seen on a drawn world (development family, drawn8): 111 of 207
        rollouts passed, 79 of them on tasks an earlier head solved before commits for other categories."""
        score = self.scores.get((self.head, task_id))
        if score is None:
            score = self.earlier(self.text, task_id)
        return score is not None and score >= 1.0


class Pacing:
    """Rollout pacing, a collaborator of the engine. State: `exploring`, the rollouts in flight, and `rolling`, their
    tasks; `origins`, the origin task of each open proposal; `awaiting`, the tasks whose failed rollout waits for
    its proposal; the epoch order of the training tasks; and an event set when a diff gets its final verdict
    (`settled`). It reads the engine's other collaborators, passed in: the diffs without a final verdict (`open`),
    the candidates waiting to replicate (`parking`), the gate, the score cache and the budgets; and the head and the
    loop's policy through `head()` and `policy()`, as they change during a run.

    `reserve` are tasks a rollout may take when every training task is solved, busy or avoided: the validation
    tasks of a gate pool that takes training tasks too (validation and training tasks are then one pool of
    evidence, each proposal's origin left out of its own, so a validation task the head fails is as good an origin
    as a training one; without them a run whose few training tasks are all solved stops with its budget unspent,
    and the validation failures unlearned). Such rollouts are counted as `reserve_rollouts`."""

    def __init__(self, *, config: RunConfig, journal: Recorder, accounts: Accounts, estimator: DurationEstimator,
                 gate: Gate, cache: ScoreCache, open_diffs: OpenDiffs, parking: Parking, train: Sequence[str],
                 sections: SectionOwners | None, head: Callable[[], Snapshot],
                 policy: Callable[[], LoopPolicy], reserve: Sequence[str] = (),
                 earlier: Callable[[str, str], float | None] = lambda text, task: None) -> None:
        self.config, self.journal, self.accounts, self.estimator = config, journal, accounts, estimator
        self.gate, self.cache, self.open, self.parking = gate, cache, open_diffs, parking
        self.train, self.sections, self.head, self.policy = list(train), sections, head, policy
        self.earlier = earlier  # (head text, task) -> an earlier head's score where the commits since were far
        training = set(self.train)
        self.reserve = [t for t in dict.fromkeys(reserve) if t not in training] if sections is None else []
        self._reserved = frozenset(self.reserve)
        self.exploring = 0
        self.rolling: Counter[str] = Counter()
        self.origins: dict[str, str] = {}  # open diff id -> the task it was proposed from
        self._near: frozenset[str] | None = None  # the tasks like those origins (`Gate.neighbours`), while unchanged
        self.awaiting: Counter[str] = Counter()  # tasks whose failed rollout waits for its proposal (async)
        self._epochs: dict[int, list[str]] = {}
        self._settled = _Signal()  # a final verdict (`until_settled`)
        self._moved = _Signal()  # anything a rollout worker's turn depends on (`_wake`)
        self._changes = 0  # wakes so far: a wait that ended on one saw something happen

    def rollout_started(self, task_id: str) -> None:
        self.exploring += 1
        self.rolling[task_id] += 1
        self.journal.counts["reserve_rollouts"] += int(task_id in self._reserved)

    def rollout_ended(self, task_id: str) -> None:
        self.exploring -= 1
        self.rolling[task_id] -= 1
        if self.rolling[task_id] <= 0:
            del self.rolling[task_id]
        self._wake()

    def note_origin(self, diff_id: str, task_id: str) -> None:
        """An open proposal was made from `task_id`."""
        self.origins[diff_id] = task_id
        self._near = None

    def forget_origin(self, diff_id: str) -> None:
        if self.origins.pop(diff_id, None) is not None:
            self._near = None

    def await_proposal(self, task_id: str) -> None:
        """A failed rollout of `task_id` is on its way to a proposer: the task stays busy until `proposal_made`."""
        self.awaiting[task_id] += 1

    def proposal_made(self, task_id: str) -> None:
        self.awaiting[task_id] -= 1
        if self.awaiting[task_id] <= 0:
            del self.awaiting[task_id]
        self._wake()

    def _busy(self) -> set[str]:
        """Tasks a rollout would likely only repeat work on: being rolled out now or proposed from, the origin of a
        proposal without a verdict (its failure is being acted on) or of a candidate waiting to replicate, and the
        tasks most like an open proposal's origin (`Gate.neighbours`: they would likely bring the same proposal)."""
        if self._near is None:
            pending = set(self.origins.values())
            self._near = frozenset(pending.union(*(self.gate.neighbours(origin) for origin in pending)))
        return {*self.rolling, *self.awaiting, *self.parking.origins}.union(self._near)

    def _known(self) -> HeadScores:
        """What is known of the head's scores now (`HeadScores`: read once per pick)."""
        text = self.head().text
        return HeadScores(content_hash(text), text, self.cache.scores, self.earlier)

    def _order(self, epoch: int) -> list[str]:
        """The seeded shuffle of the training tasks for `epoch`. A pick scans into the next epoch, and concurrent
        picks straddle two: the last few orders are kept, not one (no re-sorting back and forth)."""
        order = self._epochs.get(epoch)
        if order is None:
            order = seeded_order(self.train, seed=self.config.seed, salt=f"epoch{epoch}")
            kept = sorted(self._epochs)[-3:]
            self._epochs = {e: self._epochs[e] for e in kept} | {epoch: order}
        return order

    def tasks(self) -> list[str]:
        """Every task a rollout may take: the training tasks, then the `reserve`."""
        return [*self.train, *self.reserve]

    def _task_at(self, index: int) -> str:
        epoch, position = divmod(index, len(self.train))
        return self._order(epoch)[position]

    def pick_task(self, index: int, avoid: Collection[str] = (), worker: int | None = None) -> str:
        """The training task for rollout number `index` (epochs of a seeded shuffle), passing over the tasks the
        head is known or likely to solve (`HeadScores.solved`: a rollout would only repeat a pass), the busy ones
        (`_busy`: in flight, or the origin of work without a verdict) and those in `avoid`; when every one is passed
        over, a `reserve` task that is not, else the fallback (`scan`). In section-parallel mode, only tasks of
        the sections `worker` owns."""
        found, fallback = self.scan(index, avoid, worker)
        return fallback if found is None else found

    def free_task(self, index: int, avoid: Collection[str] = (), worker: int | None = None) -> str | None:
        """`pick_task`'s task, or None when every task, the `reserve` too, is passed over (solved, busy or in
        `avoid`)."""
        return self.scan(index, avoid, worker)[0]

    def scan(self, index: int, avoid: Collection[str] = (), worker: int | None = None) -> tuple[str | None, str]:
        """(`free_task`'s task, the fallback): both answers of one pass over the shuffle. The free task is the first
        one not passed over from `index`'s position on, so consecutive rollouts on one head tend to come back to a
        failing task after a run of passed-over ones: another try where the base's scores are already known (kept
        against taking the free tasks round robin: development family 0.935 / 0.931 against 0.927 / 0.926, sync /
        async). The fallback is the first task only likely solved (`HeadScores.solved`; not scored on the head, so
        not a sure repeat) that is not busy or in `avoid`, else the task at `index` itself."""
        busy, known = self._busy(), self._known()
        epoch, position = divmod(index, len(self.train))
        order = self._order(epoch)
        mine = None if self.sections is None or worker is None else set(self.sections.tasks_of(worker))
        after = self._order(epoch + 1)[:position]
        if mine:
            order = [t for t in order if t in mine]
            position %= len(order)
            after = order[:position]
        for task in itertools.chain(order[position:], after):
            if task not in avoid and task not in busy and not known.solved(task):
                return task, order[position]
        unscored = (t for t in itertools.chain(order[position:], after)
                    if t not in avoid and t not in busy and not known.scored(t))
        return self._from_reserve(index, avoid, busy, known), next(unscored, order[position])

    def _from_reserve(self, index: int, avoid: Collection[str], busy: Collection[str],
                      known: HeadScores) -> str | None:
        """A `reserve` task free for rollout number `index` (a seeded shuffle per pass, scanned from `index`), one
        the head is known to fail (a cached score below 1: the gate scores the head on validation tasks) before one
        not scored yet; or None."""
        if not self.reserve:
            return None
        epoch, position = divmod(index, len(self.reserve))
        order = seeded_order(self.reserve, seed=self.config.seed, salt=f"reserve{epoch}")
        free = [t for t in itertools.chain(order[position:], order[:position])
                if t not in avoid and t not in busy and not known.solved(t)]
        return next((t for t in free if known.scored(t)), free[0] if free else None)

    def reused_rollout(self, worker: str, snapshot: Snapshot, task_id: str) -> Rollout | None:
        """The rollout of `snapshot` on `task_id` from the output the gate already has of it, or None."""
        kept = self.cache.reusable(snapshot.text, task_id) if self.config.reuse_outputs else None
        if kept is None:
            return None
        reward, output = kept
        self.journal.log_soon(EventKind.ROLLOUT, {"task": task_id, "version": snapshot.version, "reward": reward,
                                          "worker": worker, "reused": True})
        self.journal.counts["reused_rollouts"] += 1
        self.journal.counts["idle_rollouts"] += 1
        return Rollout(worker, task_id, snapshot, output, reward, None)

    def settled(self) -> None:
        """A diff got its final verdict: wake what waits for one (`until_settled`) and the rollout workers."""
        self._settled.fire()
        self._wake()

    def _wake(self) -> None:
        """Something a rollout worker's turn depends on changed (a verdict, a rollout's end, a proposal made or
        not): the workers waiting in `explore_turn` or `task_turn` look again at once."""
        self._changes += 1
        self._moved.fire()

    def explore_allowed(self, extra: int = 0, worker: int | None = None, *, parked: bool = True) -> bool:
        """True if one more rollout (beside `extra` about to start) fits the division of `Budget.calls` between
        exploring and judging (`runtime.split`; with `parked`, the calls the candidates waiting to replicate may
        still need are kept too), and the gate is not behind (fewer than `BACKLOG` times its workers of proposals
        waiting or on their way); always True when calls are not limited. While each open task (in section-parallel
        mode, each of `worker`'s own) is busy or solved and something is in flight, the rollout waits for it (it could
        only repeat a task); with nothing in flight no verdict would end the wait."""
        if self.accounts.meter.budget.calls is None:
            return True
        queued = self._queued()
        if self._gate_behind(queued, extra):
            return False  # a proposal made now would wait, and be judged on a stale head
        mine = self.tasks() if self.sections is None or worker is None else self.sections.tasks_of(worker)
        if self._in_flight(extra) and self._all_taken(mine):
            return False  # every open task is being worked on: a verdict will free one (or show it solved)
        kept = replication_reserve(self.parking.replica_counts(),
                                   out=self.parking.out_for_replication(self.open)) if parked else 0.0
        return may_explore(self._figures(), calls_left=self.accounts.meter.remaining("calls"), waiting=queued,
                           exploring=self.exploring + extra, parked=kept)

    def _queued(self) -> int:
        """Open diffs a worker holds or will take up, but the parked ones (they wait for a context)."""
        return self.open.active - len(self.parking)

    def _in_flight(self, extra: int = 0) -> int:
        """Work that could still bring a verdict: queued diffs, rollouts (and `extra` about to start), and failed
        rollouts waiting for their proposal."""
        return self._queued() + self.exploring + extra + len(self.awaiting)

    def _gate_behind(self, queued: int, extra: int) -> bool:
        """True if a rollout now (beside `extra`) would bring a proposal the gate cannot judge on this head: in
        cohort mode (`LoopPolicy.cohort`) while the cohort's proposals are made or judged, or once it has as many
        rollouts as there are rollout workers; else once `BACKLOG` times the gate workers of proposals are between a
        rollout's start and their verdict."""
        if self.policy().cohort:
            return queued > 0 or bool(self.awaiting) or self.exploring + extra >= self.config.workers.rollout
        return queued + self.exploring + extra >= BACKLOG * self.config.workers.gate

    def cohorts(self) -> bool:
        """True if rollouts go out in cohorts (`LoopPolicy.cohort`, under `Budget.calls`): an aggregator step
        waits for the rest of its cohort."""
        return self.policy().cohort and self.accounts.meter.budget.calls is not None

    def parked_blocks(self, extra: int = 0) -> bool:
        """True if a rollout (beside `extra` about to start) is refused only for the calls the candidates waiting
        to replicate may still need: they should be placed now (in earlier versions too, `runtime.stale`'s
        `release_parked` winding down), as no later head may come for them within the budget."""
        if self.accounts.meter.budget.calls is None or not self.parking.replica_counts():
            return False
        return self.explore_allowed(extra, parked=False) and not self.explore_allowed(extra)

    def _all_taken(self, tasks: Sequence[str]) -> bool:
        """True if each of `tasks` is being worked on or solved on the head."""
        busy, known = self._busy(), self._known()
        return all(t in busy or known.solved(t) for t in tasks)

    def _figures(self) -> SplitFigures:
        rollouts = self.journal.counts["rollouts"] + self.journal.counts["reused_rollouts"]
        return SplitFigures(rollouts, self.journal.counts["proposals"], self.journal.counts["judged"],
                            self.accounts.meter.used["gate_evals"], self.gate.prior_cost())

    async def explore_turn(self, starved: Callable[[], bool] = lambda: False, worker: int | None = None,
                           wind_down: Callable[[], None] | None = None) -> bool:
        """Wait until a rollout may start (`explore_allowed`): a verdict, or a while, may free the calls it needs;
        False once no call is left at all, or `starved()` says nothing more could reach a verdict. While only the
        calls kept for replication hold it back (`parked_blocks`), `wind_down()` places those candidates. After
        `STUCK_WAITS` waits in which no call was made and no verdict given, the rollout starts anyway: a wait that
        nothing can end would hold the run forever."""
        seen, still = self._progress(), 0
        while not self.explore_allowed(worker=worker):
            if self.accounts.meter.remaining("calls") < 1 or starved():
                return False
            if wind_down is not None and self.parked_blocks():
                wind_down()
            now = self._progress()
            still, seen = (still + 1, seen) if now == seen else (0, now)
            if still >= STUCK_WAITS:
                self.journal.counts["explore_unstuck"] += 1
                return True
            self.journal.counts["explore_waits"] += 1
            await self._until_moved()
        return True

    async def task_turn(self, index: int, worker: int | None = None,
                        wind_down: Callable[[], None] | None = None) -> str | None:
        """The task for rollout number `index` (`pick_task`) in the asynchronous runtime. While no task is free
        (each solved on the head or being worked on) and diffs wait for their verdict, a rollout could only repeat a
        task the head solves or one being worked on, so the worker waits for a verdict instead (it may move the head
        or free a task), the candidates waiting to replicate placed first (`wind_down`); None when a wait ended
        with a rollout no longer allowed (`explore_allowed`) after a call or a verdict. With nothing waiting, or
        after `STUCK_WAITS` waits with nothing happening (the rollout goes ahead, as `explore_turn`'s does: a
        candidate stranded for want of a context keeps its origin task busy, and its closing look waits for the
        rollouts to stop), the task at `index` itself. Seen at one worker: 116 rollouts on one head repeated
        tasks it solves, while sync, whose rounds hold rollouts back while work is pending, repeated none."""
        seen, still = self._progress(), 0
        while True:
            found, fallback = self.scan(index, worker=worker)
            if found is not None or not self.open.active or still >= STUCK_WAITS:
                return fallback if found is None else found
            if wind_down is not None and len(self.parking):
                wind_down()
            if not self._in_flight():
                return fallback  # only candidates waiting for a context are open: no verdict can end a wait
            self.journal.counts["task_waits"] += 1
            await self._until_moved()
            now = self._progress()
            still, seen = (still + 1, seen) if now == seen else (0, now)
            if not still and not self.explore_allowed(worker=worker):
                return None

    def _progress(self) -> tuple[int, int, int]:
        """Calls made, diffs judged and wakes so far: unchanged over a wait, nothing happened during it."""
        return self.journal.calls, self.journal.counts["judged"], self._changes

    async def _until_moved(self) -> None:
        """Wait until a rollout worker's turn may have changed (`_wake`), a few call durations at most. Until
        2026-12-07 only a final verdict woke a worker: one that waited for a failed rollout's proposal, which came
        to nothing or went to the gate, sat out the four call durations with the run idle (at one worker, 38% of
        the wall time of a drawn world's run)."""
        await self._moved.wait(self._patience())

    async def until_settled(self) -> None:
        """Wait until some diff gets its final verdict, a few call durations at most."""
        await self._settled.wait(self._patience())

    def _patience(self) -> float:
        """How long a wait lasts at most: four mean call durations (5 ms at least)."""
        return max(0.005, 4 * self.estimator.overall)
