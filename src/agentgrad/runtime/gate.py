"""The acceptance gate: scores a candidate against its base on validation tasks, stopping once decided.

Validation tasks are visited in a fixed order per diff, in chunks. After each chunk the gate asks whether the
acceptance rule's verdict is already certain: if every remaining task were a loss the candidate would still pass,
or if every remaining task were a win it would still fail. Then it stops: the evidence it returns leads the
aggregator to exactly the verdict the whole split would have given, at a fraction of the calls. Before that, an
optional screen tries the candidate on the training task it was proposed for; one that does not beat the base
there is rejected at the cost of one call (screening can only reject, so it never adds a false accept).

The tasks a candidate is scored on are its *plan* (`runtime.gateplan`: the tasks most like its origin first, then a
seeded sample of the rest); the gate scores them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

import anyio

from agentgrad.core.evidence import Evidence, Row
from agentgrad.optim.futility import PassThresholds, prob_pass_later
from agentgrad.optim.judge import RowTally, certain, prefer_calibrated
from agentgrad.optim.noise import NoiseEstimate
from agentgrad.optim.stats import SIGN_TEST_PRIOR
from agentgrad.runtime.budget import OutOfBudget
from agentgrad.runtime.gateconfig import GateConfig
from agentgrad.runtime.gateplan import GatePlan
from agentgrad.runtime.locality import Locality
from agentgrad.runtime.scheduler import DurationEstimator

Score = Callable[[str, str], Awaitable[float]]  # (text, task id) -> score
SPOT_CHECK = 4  # a re-check scores again this many of the candidate's wins and losses on the new head
UNFOCUSED_FIRST = 8  # the first look of a candidate with too few tasks like its origin scores this many first


def _shows_gain(scores: Mapping[str, tuple[float, float]]) -> bool:
    """True if the candidate won on at least two of the tasks scored and on more than it lost: a first look cut to
    a harm check then goes on with the rest of its plan (stopping early only ever turns a verdict into a reject)."""
    won = sum(1 for b, c in scores.values() if c > b)
    return won >= 2 and won > sum(1 for b, c in scores.values() if c < b)


@dataclass(frozen=True)
class _Look:
    """What the early stop of one look needs: the focus tasks (the gain is looked for there; empty: on every
    task), the δ of this look, the noise estimate, and whether the order is free of earlier scores (futility)."""

    focus: frozenset[str]
    delta: float
    noise: NoiseEstimate | None
    random: bool
    calibrated: bool = False


def verdict_is_certain(wins: float, losses: float, remaining: int, *, delta: float, margin: float,
                       prior: tuple[float, float] = SIGN_TEST_PRIOR) -> bool:
    """True when no outcome of the `remaining` tasks can change whether P(gain > margin) > 1 − δ: the sign test's
    case of `optim.judge.certain` (no focus, no noise estimate), which the gate uses in general."""
    tally = RowTally(wins, losses, wins, losses, 0)
    return certain(tally, tally, focused=False, gain_left=remaining, other_left=0, delta=delta, margin=margin,
                   noise=None, prior=prior)


class Gate(GatePlan):
    """Builds evidence for candidates on their plans (`GatePlan`); `score(text, task_id)` is the runtime's cached,
    budgeted evaluation."""

    def __init__(self, score: Score, val_ids: Sequence[str], config: GateConfig, *, seed: int, margin: float,
                 estimator: DurationEstimator, prior: tuple[float, float] = SIGN_TEST_PRIOR,
                 peek: Callable[[str, str], float | None] | None = None, pool: Sequence[str] | None = None,
                 locality: Locality | None = None, known: Callable[[str], Collection[str]] | None = None,
                 noise: Callable[[], NoiseEstimate | None] | None = None,
                 earlier: Callable[[str, str], float | None] | None = None, finish: int | None = None) -> None:
        """`val_ids` is the validation split; `pool` the tasks the gate may score (default: `val_ids`); `earlier`
        (text, task) -> what an earlier head scored there while the commits since were for other tasks
        (`NoiseWatch.earlier`), or None; `finish` (the run slots, when calls are budgeted): a window holds at most
        that many tasks and lets the calls in flight finish once its verdict is certain (`_windowed`)."""
        super().__init__(val_ids if pool is None else pool, config, seed=seed, margin=margin, prior=prior,
                         locality=locality, known=known)
        self.score, self.val_ids, self.peek = score, list(val_ids), peek
        self.noise = noise or (lambda: None)
        self.earlier = earlier or (lambda text, task_id: None)
        self.estimator, self.finish = estimator, finish
        self.tasks_skipped = 0
        self.tasks_carried = 0
        self.futile_stops = 0
        self._thresholds: dict[float, PassThresholds] = {}

    async def screen(self, texts: tuple[str, str], base_score: float, task_id: str,
                     others: Sequence[str] = ()) -> tuple[bool, dict[str, tuple[float, float]]]:
        """Score the candidate (`texts` is (base, candidate)) on its origin task, where the base scored
        `base_score`, and both on `others`; passes only if the candidate's sum beats the base's. Returns the
        verdict and the (base, candidate) scores per task."""
        scores: dict[str, tuple[float, float]] = {}
        short: list[OutOfBudget] = []

        async def origin() -> None:
            try:
                scores[task_id] = (base_score, await self.score(texts[1], task_id))
            except OutOfBudget as exc:
                short.append(exc)

        async def rest() -> None:
            try:
                scores.update(await self.score_pairs(texts, others))
            except OutOfBudget as exc:
                short.append(exc)

        async with anyio.create_task_group() as group:
            group.start_soon(origin)
            if others:
                group.start_soon(rest)
        if short:
            raise short[0]
        return sum(c for _, c in scores.values()) > sum(b for b, _ in scores.values()), scores

    def screen_cost(self) -> int:
        """The most calls one screen makes: the candidate on its origin, both sides on each other task."""
        return 0 if not self.config.screen else 2 * self.config.screen_tasks - 1

    async def score_pairs(self, texts: tuple[str, str], ids: Sequence[str]) -> dict[str, tuple[float, float]]:
        """Score base and candidate on `ids`, all at once (longest first); OutOfBudget if any call could not run."""
        order = self.estimator.longest_first(list(ids))
        scores = await self._score_all([(texts[i], t) for t in order for i in (0, 1)])
        return {t: (scores[(texts[0], t)], scores[(texts[1], t)]) for t in ids}

    async def score_each(self, text: str, ids: Sequence[str]) -> None:
        """Score `text` on `ids`, all at once (the scores land in the cache); OutOfBudget if a call could not run."""
        await self._score_all([(text, t) for t in ids])

    async def _score_all(self, items: Sequence[tuple[str, str]]) -> dict[tuple[str, str], float]:
        """Score each (text, task) of `items`, started in their order, all at once; OutOfBudget if any call could
        not run (after the others have ended)."""
        scores: dict[tuple[str, str], float] = {}
        short = False

        async def one(text: str, task_id: str) -> None:
            nonlocal short
            try:
                scores[(text, task_id)] = await self.score(text, task_id)
            except OutOfBudget:
                short = True

        async with anyio.create_task_group() as group:
            for text, task_id in items:
                group.start_soon(one, text, task_id)
        if short:
            raise OutOfBudget("gate_evals")
        return scores

    async def pair(self, texts: tuple[str, str], task_id: str) -> tuple[float, float]:
        """Base and candidate scores on one task, both at once; OutOfBudget if either could not run. When `peek`
        finds the base's score cached (the usual case) only the candidate is scored, with no task group."""
        base = self.peek(texts[0], task_id) if self.peek is not None else None
        if base is None:
            return (await self.score_pairs(texts, [task_id]))[task_id]
        return base, await self.score(texts[1], task_id)

    async def _windowed(self, texts: tuple[str, str], order: Sequence[str], look: _Look, full: bool,
                        known: dict[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
        """Keep `chunk` tasks in flight and start the next one as soon as any finishes (no barrier, so one slow
        call holds back nothing else); stop once the verdict is certain, cancelling what is in flight, or, with
        `finish` (calls are budgeted, so a call cut off is paid for with nothing to show), letting it finish: an
        exact stop keeps those rows (its verdict is the same whatever they say), a futility stop only caches them.

        The tasks visited are those of `order` (a seeded random order, which futility assumes); only the first
        window starts longest first, so that when slots are scarce the slowest calls get them first."""
        scores, total = dict(known), len(known) + len(order)
        if not full and self._certain(scores, total - len(scores), look):
            return self._skipped(scores, total)
        stop = await self._slide(texts, order, scores, lambda: None if full else
                                 self._certain(scores, total - len(scores), look))
        return scores if stop is None else self._skipped(scores, total)

    async def _slide(self, texts: tuple[str, str], order: Sequence[str], scores: dict[str, tuple[float, float]],
                     check: Callable[[], str | None]) -> str | None:
        """Score `order` into `scores` through the sliding window, asking `check` after each pair lands; returns
        why the window stopped early (None: it scored every task); OutOfBudget if a call could not run."""
        send, receive = anyio.create_memory_object_stream[tuple[str, tuple[float, float] | None]](len(order) or 1)
        short, stop = False, None

        async def one(task_id: str) -> None:
            try:
                result: tuple[float, float] | None = await self.pair(texts, task_id)
            except OutOfBudget:
                result = None
            await send.send((task_id, result))

        async with anyio.create_task_group() as group, send, receive:
            width = self.config.chunk if self.finish is None else min(self.config.chunk, self.finish)
            started = running = min(len(order), max(1, width))
            for task_id in self.estimator.longest_first(order[:started]):
                group.start_soon(one, task_id)
            while running:
                task_id, result = await receive.receive()
                running -= 1
                if stop is not None:  # a stopped window's calls finishing (`finish`): they land in the cache
                    if stop == "exact" and result is not None:
                        scores[task_id] = result
                    continue
                if result is None:
                    short = True
                    break
                scores[task_id] = result
                stop = check()
                if stop is not None and self.finish is None:
                    break
                if stop is None and started < len(order):
                    group.start_soon(one, order[started])
                    started, running = started + 1, running + 1
            group.cancel_scope.cancel()
        if short:
            raise OutOfBudget("gate_evals")
        return stop

    async def _chunked(self, texts: tuple[str, str], order: Sequence[str], look: _Look, full: bool,
                       known: dict[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
        """Score `order` in chunks with a look at the evidence before each (the tasks scored are then a function
        of the evidence alone, which the synchronous runtime's reproducibility needs)."""
        scores, total = dict(known), len(known) + len(order)
        step = max(1, self.config.chunk)
        for start in range(0, len(order), step):
            if not full and self._certain(scores, total - len(scores), look):
                return self._skipped(scores, total)
            scores.update(await self.score_pairs(texts, order[start:start + step]))
        return scores

    def _skipped(self, scores: dict[str, tuple[float, float]], total: int) -> dict[str, tuple[float, float]]:
        self.tasks_skipped += total - len(scores)
        return scores

    def _certain(self, scores: dict[str, tuple[float, float]], remaining: int, look: _Look) -> str | None:
        """Why scoring more tasks is not worth it, or None: "exact", the verdict is certain (`optim.judge.certain`),
        or "futile", (every fourth look, for the sign test on tasks in random order) passing has become improbable
        (futility)."""
        if not self.config.early_stop or remaining == 0:
            return None
        rows = [Row(t, b, c) for t, (b, c) in scores.items()]
        focused = bool(look.focus)
        gain = RowTally.of(r for r in rows if r.task_id in look.focus) if focused else RowTally.of(rows)
        gain_left = len(look.focus - scores.keys()) if focused else remaining
        if certain(gain, RowTally.of(rows), focused=focused, gain_left=gain_left, other_left=remaining - gain_left,
                   delta=look.delta, margin=self.margin, noise=look.noise, prior=self.prior,
                   calibrated=look.calibrated):
            return "exact"
        if not look.random or focused or look.calibrated or self.config.futility <= 0 \
                or len(scores) % 4:
            return None
        thresholds = self._thresholds.get(look.delta)
        if thresholds is None:
            thresholds = self._thresholds[look.delta] = PassThresholds(delta=look.delta, margin=self.margin,
                                                                       prior=self.prior)
        differing = sum(1 for r in rows if r.delta != 0)
        futile = prob_pass_later(gain.wins, gain.losses, differing, len(scores), remaining, thresholds) \
            < self.config.futility
        self.futile_stops += futile
        return "futile" if futile else None

    def prior_cost(self) -> float:
        """The calls one proposal is expected to cost the gate before any was judged: a screen and half a plan."""
        plan = len(self.pool) if self.config.max_examples is None else min(len(self.pool), self.config.max_examples)
        return self.screen_cost() + plan / 2

    async def evidence(self, diff_id: str, base_text: str, base_version: int, cand_text: str, *, delta: float,
                       full: bool = False, windowed: bool = False,
                       known: Mapping[str, tuple[float, float]] | None = None,
                       first: Sequence[str] = (), origin: str | None = None, looks: int = 1,
                       given_focus: Sequence[str] = ()) -> Evidence:
        """Paired evidence of candidate vs base on the tasks of its plan (`plan`, `max_examples` times `looks`
        tasks in all; every pool task when `full`).

        `first` (tasks to re-score first, from `reverify`) comes ahead of the plan; pairs in `known` are taken as
        they are. By default tasks are scored in chunks with a look at the evidence between chunks, so the tasks
        scored are a function of the evidence alone (the synchronous runtime's reproducibility needs that);
        `windowed` scores them through a sliding window instead, which keeps slots busy under heavy-tailed latency.
        The evidence is `full` when it covers the whole validation split.
        """
        given, noise = dict(known or {}), self.noise()
        focus, lead, rest = self._order(base_text, base_version, origin, looks, delta=delta, noise=noise,
                                        full=full, given=given, first=first, given_focus=given_focus)
        lone = (not full and looks == 1 and not focus and origin is not None and not given and not first
                and self.config.early_stop and self.config.max_examples is not None)  # else: the plan asked for
        order = lead + rest
        visit = self._windowed if windowed else self._chunked
        # futility assumes the tasks come in an order that does not depend on earlier scores: not so for re-checks
        planned = len(focus) if focus else len(given) + len(order)
        look = _Look(frozenset(focus), delta, noise, not given and not first,
                     prefer_calibrated(planned, delta=delta, margin=self.margin, noise=noise, prior=self.prior))
        if lone and len(order) > UNFOCUSED_FIRST:  # nothing like its origin: a harm check, the rest if it shows gain
            scores = await visit((base_text, cand_text), order[:UNFOCUSED_FIRST], look, full, given)
            if _shows_gain(scores):
                scores = await visit((base_text, cand_text), order[UNFOCUSED_FIRST:], look, full, scores)
        else:
            scores = await visit((base_text, cand_text), order, look, full, given)
        complete = all(t in scores for t in self.val_ids)
        far = self.far(origin, [t for t in scores if t not in look.focus])
        return Evidence.paired({t: b for t, (b, _) in scores.items()}, {t: c for t, (_, c) in scores.items()},
                               base_version=base_version, full=complete,
                               focus=tuple(t for t in focus if t in scores and not self._doubtful(base_text, t,
                                                                                                 scores[t][0])),
                               far=tuple(far), calibrated=look.calibrated)

    def _doubtful(self, base_text: str, task_id: str, base_score: float) -> bool:
        """True if the base failed `task_id` where an earlier head solved it, every commit since being for other
        tasks (`earlier`): the failure is likely the answer noise of this text, and a change with no effect, a
        fresh text, wins there most of the time. Such a task is no focus task: a gain is not looked for there."""
        if base_score >= 1.0:
            return False
        before = self.earlier(base_text, task_id)
        return before is not None and before >= 1.0

    async def reverify(self, diff_id: str, texts: tuple[str, str], base_version: int, old: Evidence,
                       touched: Collection[str], *, delta: float, windowed: bool = False,
                       looks: int = 1, origin: str | None = None, spread: bool = False) -> Evidence:
        """Evidence on a new head for a candidate scored on an older one (or getting another look), re-scoring only
        what can have moved.

        The tasks the commits in between changed (`touched`) are scored again on the new head, first, with (when
        the head moved) a spot check of `SPOT_CHECK` of the candidate's own wins and losses (a head that already
        has its effect shows there); every other row is carried over as it is (assuming no interaction where the
        commits in between made no difference; an edit of the same unit is a conflict and never gets here). Then,
        as in `evidence`, more tasks are scored only while the verdict is open (up to the look's plan). With
        `spread`, the plan has no focus: the gain is looked for on every task, as for a change with no origin.
        """
        moved = old.base_version != base_version  # on the same head every old row is still exact
        spot = set(sorted(r.task_id for r in old.rows if r.delta != 0)[:SPOT_CHECK]) if moved else set()
        keep = {r.task_id: (r.base, r.candidate) for r in old.rows
                if r.task_id not in touched and r.task_id not in spot}
        redo = [r.task_id for r in old.rows if r.task_id not in keep]
        self.tasks_carried += len(keep)
        return await self.evidence(diff_id, texts[0], base_version, texts[1], delta=delta, windowed=windowed,
                                   known=keep, first=redo, looks=looks, given_focus=() if spread else old.focus,
                                   origin=None if spread else origin)
