"""The plan of the acceptance gate: which tasks a candidate is scored on, and in what order.

A candidate's *plan* is first the `focus` tasks whose inputs look most like its origin task's
(`runtime.locality`: where a real effect shows), then a seeded random sample of the rest (a regression check),
`max_examples` in all. The gate's *pool* is the validation split, or, when that is small, the validation and
training tasks together (the origin task left out: the proposal was written for it); `RunConfig` and the run's
protocol say which. The order depends on the inputs and the seed only, never on a score. `runtime.gate` scores
the plan; what is here does no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

from agentgrad.optim.judge import MIN_FOCUS, prefer_calibrated, wins_needed
from agentgrad.optim.noise import NoiseEstimate
from agentgrad.optim.stats import SIGN_TEST_PRIOR
from agentgrad.runtime.gateconfig import GateConfig
from agentgrad.runtime.locality import Locality
from agentgrad.runtime.scheduler import seeded_order

FOCUS_CUT = 0.5  # a focus task is at least this share as like the origin as the most alike task


class GatePlan:
    """Plans for candidates on the tasks of `pool`; `known(text)` the tasks whose score of `text` costs nothing
    (cached), which a plan takes first among equals."""

    def __init__(self, pool: Sequence[str], config: GateConfig, *, seed: int, margin: float,
                 prior: tuple[float, float] = SIGN_TEST_PRIOR, locality: Locality | None = None,
                 known: Callable[[str], Collection[str]] | None = None) -> None:
        self.pool, self.config, self.locality = list(pool), config, locality
        self.known = known or (lambda text: ())
        self.seed, self.margin, self.prior = seed, margin, prior
        self._neighbours: dict[str, tuple[str, ...]] = {}
        self._cuts: dict[str, float] = {}  # origin -> the median similarity of the pool to it (`far`)

    def plan(self, base_text: str, base_version: int, origin: str | None,
             looks: int = 1) -> tuple[list[str], list[str]]:
        """A candidate's plan, (focus, rest): the `focus` (times `looks`) pool tasks most like `origin`, then the
        other pool tasks in a seeded random order per base version. Among equals, tasks whose base score is cached
        come first: candidates on one head share those, so they cost one call instead of two. Nothing in the plan
        depends on this candidate's scores."""
        pool = [t for t in self.pool if t != origin]
        rank = {t: i for i, t in enumerate(seeded_order(pool, seed=self.seed, salt=f"v{base_version}"))}
        known = self.known(base_text)
        focus: list[str] = []
        if origin is not None and self.locality is not None and self.config.focus > 0:
            near = self.locality.similarities(origin)
            top = max((near.get(t, 0.0) for t in pool), default=0.0)
            close = [t for t in pool if near.get(t, 0.0) >= FOCUS_CUT * top > 0]  # the origin's own neighbourhood
            close.sort(key=lambda t: (-round(near[t], 9), t not in known, rank[t]))
            focus = close[: self.config.focus * looks]
        if len(focus) < MIN_FOCUS:  # too few tasks look like the origin: the gain is looked for on every task
            focus = []
        chosen = set(focus)
        rest = sorted((t for t in pool if t not in chosen), key=lambda t: (t not in known, rank[t]))
        return focus, rest

    def _order(self, base_text: str, base_version: int, origin: str | None, looks: int, *, delta: float,
               noise: NoiseEstimate | None, full: bool, given: Mapping[str, tuple[float, float]],
               first: Sequence[str], given_focus: Sequence[str]) -> tuple[list[str], list[str], list[str]]:
        """The focus of `evidence`'s plan, the tasks to score first (`first`, then the focus) and the rest, those
        already in `given` left out; the focus is dropped when too few tasks are like the origin to show a gain."""
        focus, rest = self.plan(base_text, base_version, origin, looks)
        focus = list(dict.fromkeys([*focus, *(t for t in given_focus if t in given or t in self.pool)]))
        if focus and not given_focus and not self._can_pass(len(focus), delta, noise):
            focus, rest = [], [*focus, *rest]  # too few tasks like the origin to ever show a gain: look everywhere
        lead = [t for t in dict.fromkeys([*first, *focus]) if t not in given]
        rest = [t for t in rest if t not in given and t not in set(lead)]
        if not full:
            rest = self._trimmed(rest, focus, given, len(lead), looks)
        return focus, lead, rest

    def _can_pass(self, rows: int, delta: float, noise: NoiseEstimate | None) -> bool:
        """True if wins on `rows` gain rows (and no loss) can pass the test the gate would pick for them."""
        calibrated = prefer_calibrated(rows, delta=delta, margin=self.margin, noise=noise, prior=self.prior)
        return wins_needed(rows, delta=delta, margin=self.margin, noise=noise, prior=self.prior,
                           calibrated=calibrated) is not None

    def _trimmed(self, rest: list[str], focus: Sequence[str], given: Mapping[str, object], lead: int,
                 looks: int) -> list[str]:
        """The rest of a plan cut to `max_examples` tasks a look in all and, when the plan has focus tasks (where
        the gain shows), to `harm_sample` other tasks a look (where only harm is looked for)."""
        if self.config.max_examples is None:
            return rest
        rest = rest[: max(0, self.config.max_examples * looks - len(given) - lead)]
        if focus and self.config.harm_sample is not None:
            chosen = set(focus)
            rest = rest[: max(0, self.config.harm_sample * looks - sum(1 for t in given if t not in chosen))]
        return rest

    def further(self, base_text: str, base_version: int, origin: str | None, looks: int, *,
                focus: Collection[str], scored: Collection[str]) -> set[str]:
        """The tasks where look `looks` could show a gain its evidence (`focus` and `scored` tasks) lacks: with focus
        tasks, that look's new focus tasks; without (the gain was looked for on every task), the tasks it adds."""
        more, rest = self.plan(base_text, base_version, origin, looks)
        if focus:
            return set(more) - set(focus)
        unscored = [t for t in [*more, *rest] if t not in scored]
        limit = self.config.max_examples
        return set(unscored if limit is None else unscored[: max(0, limit * looks - len(scored))])

    def neighbours(self, origin: str) -> tuple[str, ...]:
        """The tasks (of any split the locality knows, at most `focus`) most like `origin`, by the focus rule: what
        a pending proposal from `origin` is likely to be proposed from again. Remembered per origin."""
        found = self._neighbours.get(origin)
        if found is None:
            near = self.locality.similarities(origin) if self.locality is not None else {}
            top = max(near.values(), default=0.0)
            close = sorted((t for t, v in near.items() if v >= FOCUS_CUT * top > 0),
                           key=lambda t: (-round(near[t], 9), t))
            found = tuple(close[: self.config.focus])
            if len(self._neighbours) >= 4096:
                self._neighbours.clear()
            self._neighbours[origin] = found
        return found

    def far(self, origin: str | None, rest: Sequence[str]) -> list[str]:
        """The tasks of `rest` least like `origin`: at or below the median similarity of the pool to it (all of
        `rest` without an origin or a locality); never the origin itself."""
        if origin is None or self.locality is None:
            return list(rest)
        near = self.locality.similarities(origin)
        cut = self._cuts.get(origin)
        if cut is None:  # remembered per origin: rollouts ask it of every commit's origins for every task they pass
            values = sorted(near.get(t, 0.0) for t in self.pool if t != origin)
            cut = values[len(values) // 2] if values else 0.0
            if len(self._cuts) >= 4096:
                self._cuts.clear()
            self._cuts[origin] = cut
        return [t for t in rest if t != origin and near.get(t, 0.0) <= cut]



__all__ = ["FOCUS_CUT", "GatePlan"]
