"""The acceptance gate: scores a candidate against its base on validation tasks, stopping once decided.

Validation tasks are visited in a fixed order per diff, in chunks. After each chunk the gate asks whether the
acceptance rule's verdict is already certain: if every remaining task were a loss the candidate would still pass,
or if every remaining task were a win it would still fail. Then it stops: the evidence it returns leads the
aggregator to exactly the verdict the whole split would have given, at a fraction of the calls. Before that, an
optional screen tries the candidate on the training task it was proposed for; one that does not beat the base
there is rejected at the cost of one call (screening can only reject, so it never adds a false accept).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

import anyio

from agentgrad.core.evidence import Evidence
from agentgrad.errors import ConfigError
from agentgrad.optim.futility import PassThresholds, prob_pass_later
from agentgrad.optim.stats import SKEPTICAL_PRIOR, prob_improvement
from agentgrad.runtime.budget import OutOfBudget
from agentgrad.runtime.scheduler import DurationEstimator, seeded_order

Score = Callable[[str, str], Awaitable[float]]  # (text, task id) -> score


@dataclass(frozen=True)
class GateConfig:
    """How the gate spends evaluations.

    Args:
        chunk: validation tasks scored between two looks at the evidence.
        screen: first try the candidate on the training task it was proposed for.
        early_stop: stop as soon as the verdict is certain (exact; never changes a verdict).
        max_examples: at most this many validation tasks per candidate (None: the whole split).
        futility: also stop (and so reject) once the predictive probability of passing on the whole split falls
            below this (`optim.futility`; 0 turns it off). It never adds an accept; it costs a little power.
    """

    chunk: int = 8
    screen: bool = True
    early_stop: bool = True
    max_examples: int | None = None
    futility: float = 0.02

    def __post_init__(self) -> None:
        if isinstance(self.futility, bool) or not isinstance(self.futility, (int, float)) \
                or not 0.0 <= self.futility < 0.5:
            raise ConfigError(f"GateConfig.futility must be a probability in [0, 0.5), got {self.futility!r}")
        for name in ("chunk", "max_examples"):
            value = getattr(self, name)
            if name == "max_examples" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"GateConfig.{name} must be an int >= 1, got {value!r}")


def verdict_is_certain(wins: float, losses: float, remaining: int, *, delta: float, margin: float,
                       prior: tuple[float, float] = SKEPTICAL_PRIOR) -> bool:
    """True when no outcome of the `remaining` tasks can change whether P(gain > margin) > 1 − δ."""
    worst = prob_improvement(wins, losses + remaining, margin=margin, prior=prior)
    best = prob_improvement(wins + remaining, losses, margin=margin, prior=prior)
    return worst > 1 - delta or best <= 1 - delta


class Gate:
    """Builds evidence for candidates; `score(text, task_id)` is the runtime's cached, budgeted evaluation."""

    def __init__(self, score: Score, val_ids: Sequence[str], config: GateConfig, *, seed: int, margin: float,
                 estimator: DurationEstimator, prior: tuple[float, float] = SKEPTICAL_PRIOR,
                 peek: Callable[[str, str], float | None] | None = None) -> None:
        self.score, self.val_ids, self.config, self.peek = score, list(val_ids), config, peek
        self.seed, self.margin, self.prior, self.estimator = seed, margin, prior, estimator
        self.tasks_skipped = 0
        self.tasks_carried = 0
        self.futile_stops = 0
        self._thresholds: dict[float, PassThresholds] = {}

    async def screen(self, base_score: float, cand_text: str, task_id: str) -> tuple[bool, float]:
        """Score the candidate on its origin task; passes only if it beats the base's `base_score` there."""
        score = await self.score(cand_text, task_id)
        return score > base_score, score

    async def score_pairs(self, texts: tuple[str, str], ids: Sequence[str]) -> dict[str, tuple[float, float]]:
        """Score base and candidate on `ids`, all at once (longest first); OutOfBudget if any call could not run."""
        scores: dict[tuple[str, int], float] = {}
        short = False

        async def side(task_id: str, i: int) -> None:
            nonlocal short
            try:
                scores[(task_id, i)] = await self.score(texts[i], task_id)
            except OutOfBudget:
                short = True

        async with anyio.create_task_group() as group:
            for task_id in self.estimator.longest_first(list(ids)):
                group.start_soon(side, task_id, 0)
                group.start_soon(side, task_id, 1)
        if short:
            raise OutOfBudget("gate_evals")
        return {t: (scores[(t, 0)], scores[(t, 1)]) for t in ids}

    async def _pair(self, texts: tuple[str, str], task_id: str) -> tuple[float, float]:
        """Base and candidate scores on one task, both at once; OutOfBudget if either could not run. When `peek`
        finds the base's score cached (the usual case) only the candidate is scored, with no task group."""
        base = self.peek(texts[0], task_id) if self.peek is not None else None
        if base is None:
            return (await self.score_pairs(texts, [task_id]))[task_id]
        return base, await self.score(texts[1], task_id)

    async def _windowed(self, texts: tuple[str, str], order: Sequence[str], delta: float, full: bool,
                        known: dict[str, tuple[float, float]], random: bool) -> dict[str, tuple[float, float]]:
        """Keep `chunk` tasks in flight and start the next one as soon as any finishes (no barrier, so one slow
        call holds back nothing else); stop, cancelling what is in flight, once the verdict is certain.

        The tasks visited are those of `order` (a seeded random order, which futility assumes); only the first
        window starts longest first, so that when slots are scarce the slowest calls get them first."""
        scores, total = dict(known), len(known) + len(order)
        if not full and self._certain(scores, total - len(scores), delta, random):
            return self._skipped(scores, total)
        send, receive = anyio.create_memory_object_stream[tuple[str, tuple[float, float] | None]](len(order) or 1)
        short = False

        async def one(task_id: str) -> None:
            try:
                result: tuple[float, float] | None = await self._pair(texts, task_id)
            except OutOfBudget:
                result = None
            await send.send((task_id, result))

        async with anyio.create_task_group() as group, send, receive:
            started = min(len(order), max(1, self.config.chunk))
            for task_id in self.estimator.longest_first(order[:started]):
                group.start_soon(one, task_id)
            for _ in order:  # every task started sends one result; at most len(order) arrive
                task_id, result = await receive.receive()
                if result is None:
                    short = True
                    break
                scores[task_id] = result
                if not full and self._certain(scores, total - len(scores), delta, random):
                    self._skipped(scores, total)
                    break
                if started < len(order):
                    group.start_soon(one, order[started])
                    started += 1
            group.cancel_scope.cancel()
        if short:
            raise OutOfBudget("gate_evals")
        return scores

    async def _chunked(self, texts: tuple[str, str], order: Sequence[str], delta: float, full: bool,
                       known: dict[str, tuple[float, float]], random: bool) -> dict[str, tuple[float, float]]:
        """Score `order` in chunks with a look at the evidence before each (the tasks scored are then a function
        of the evidence alone, which the synchronous runtime's reproducibility needs)."""
        scores, total = dict(known), len(known) + len(order)
        step = max(1, self.config.chunk)
        for start in range(0, len(order), step):
            if not full and self._certain(scores, total - len(scores), delta, random):
                return self._skipped(scores, total)
            scores.update(await self.score_pairs(texts, order[start:start + step]))
        return scores

    def _skipped(self, scores: dict[str, tuple[float, float]], total: int) -> dict[str, tuple[float, float]]:
        self.tasks_skipped += total - len(scores)
        return scores

    def _certain(self, scores: dict[str, tuple[float, float]], remaining: int, delta: float,
                 futility: bool = True) -> bool:
        """True when scoring more tasks is not worth it: the verdict is certain, or (every fourth look, when the
        tasks are visited in random order) passing has become improbable (futility)."""
        if not self.config.early_stop or remaining == 0:
            return False
        wins = sum(max(c - b, 0.0) for b, c in scores.values())
        losses = sum(max(b - c, 0.0) for b, c in scores.values())
        if verdict_is_certain(wins, losses, remaining, delta=delta, margin=self.margin, prior=self.prior):
            return True
        if not futility or self.config.futility <= 0 or len(scores) % 4:
            return False
        thresholds = self._thresholds.get(delta)
        if thresholds is None:
            thresholds = self._thresholds[delta] = PassThresholds(delta=delta, margin=self.margin, prior=self.prior)
        differing = sum(1 for b, c in scores.values() if b != c)
        futile = prob_pass_later(wins, losses, differing, len(scores), remaining, thresholds) < self.config.futility
        self.futile_stops += futile
        return futile

    async def evidence(self, diff_id: str, base_text: str, base_version: int, cand_text: str, *, delta: float,
                       full: bool = False, windowed: bool = False,
                       known: Mapping[str, tuple[float, float]] | None = None,
                       first: Sequence[str] = ()) -> Evidence:
        """Paired evidence of candidate vs base on validation tasks (all of them when `full`).

        Tasks are visited in a seeded order per base version (so candidates on the same head share the base's
        cached scores), `first` ahead of the rest; pairs in `known` are taken as they are. By default tasks are
        scored in chunks with a look at the evidence between chunks, so the tasks scored are a function of the
        evidence alone (the synchronous runtime's reproducibility needs that); `windowed` scores them through a
        sliding window instead, which keeps slots busy under heavy-tailed latency.
        """
        order = seeded_order(self.val_ids, seed=self.seed, salt=f"v{base_version}")
        if not full and self.config.max_examples is not None:
            order = order[: self.config.max_examples]
        given = dict(known or {})
        lead = [t for t in dict.fromkeys(first) if t not in given]
        order = lead + [t for t in order if t not in given and t not in set(lead)]
        visit = self._windowed if windowed else self._chunked
        # futility assumes the tasks come in random order: not so when some were chosen to come first
        scores = await visit((base_text, cand_text), order, delta, full, given, not given and not lead)
        complete = len(scores) == len(self.val_ids)
        return Evidence.paired({t: b for t, (b, _) in scores.items()}, {t: c for t, (_, c) in scores.items()},
                               base_version=base_version, full=complete)

    async def reverify(self, diff_id: str, texts: tuple[str, str], base_version: int, old: Evidence,
                       touched: Collection[str], *, delta: float, windowed: bool = False) -> Evidence:
        """Evidence on a new head for a candidate that passed on an older one, re-scoring only what can have moved.

        The tasks that carried the candidate's effect (its wins and losses) and the tasks the commits in between
        changed (`touched`) are scored again on the new head, first; the candidate's other ties are carried over
        as ties (assuming no interaction where neither change made a difference). Then, as in `evidence`, more
        tasks are scored only while the verdict is open.
        """
        keep = {r.task_id: (r.base, r.candidate) for r in old.rows
                if r.base == r.candidate and r.task_id not in touched}
        redo = [r.task_id for r in old.rows if r.task_id not in keep]
        self.tasks_carried += len(keep)
        return await self.evidence(diff_id, texts[0], base_version, texts[1], delta=delta, windowed=windowed,
                                   known=keep, first=redo)
