"""Reference worlds drawn at random, for checking that what was tuned on the named presets carries over.

The named worlds of `agentgrad.testing.presets` are the ones the optimizer was developed against; a figure measured
only there can be overfitted. `drawn(index, family)` builds a world whose every shape parameter is drawn from the
regime of issue 9: 12 to about 300 tasks, 2 to 14 categories of flat to steeply skewed sizes, 0-10% answer noise,
easy tasks, override rules, 3 to 9 methods a category, proposers from poor to good, and three split shapes.

`HELD_OUT` is the family kept for measuring only: develop on another family (`DEV`), quote figures on this one.
"""

from __future__ import annotations

import random

from agentgrad.errors import ConfigError
from agentgrad.testing.world import WorldConfig

HELD_OUT = 9001  # measure on this family, never tune on it
DEV = 17  # a family to develop against
PREFIX = "drawn"
_SPLITS = ((0.5, 0.25, 0.25), (0.6, 0.2, 0.2), (0.4, 0.3, 0.3))
_MAX_TASKS = 320


def _proposer(rng: random.Random) -> tuple[float, float, float, float]:
    """Proposal-kind rates (right, junk, contradictions, duplicates): right 30-70%, the rest shared out."""
    right = round(rng.uniform(0.3, 0.7), 2)
    weights = [rng.uniform(0.2, 1.0) for _ in range(3)]
    junk, contradict = (round((1 - right) * w / sum(weights), 3) for w in weights[:2])
    return right, junk, contradict, round(1 - right - junk - contradict, 6)


def _sizes(rng: random.Random) -> tuple[int, int, float]:
    """Categories, tasks of the largest and the Zipf exponent, redrawn until the world has 12 to `_MAX_TASKS`."""
    while True:
        shape = (rng.randint(2, 14), rng.choice((4, 6, 8, 12, 16, 24, 32, 48)),
                 rng.choice((0.0, 0.5, 0.8, 1.0, 1.2, 1.5)))
        total = sum(WorldConfig(n_categories=shape[0], tasks_per_category=shape[1], zipf=shape[2]).category_sizes())
        if 12 <= total <= _MAX_TASKS:
            return shape


def drawn(index: int, family: int = HELD_OUT) -> WorldConfig:
    """World number `index` (0, 1, ...) of `family`: the same arguments always give the same world."""
    if index < 0:
        raise ConfigError(f"a drawn world's index is 0 or more, got {index}")
    rng = random.Random(family * 1_000_003 + index)
    categories, largest, zipf = _sizes(rng)
    train, val, test = rng.choice(_SPLITS)
    overrides = min(categories, rng.choice((0, 0, 0, 1, 2)))
    right, junk, contradict, duplicate = _proposer(rng)
    return WorldConfig(n_categories=categories, tasks_per_category=largest, zipf=zipf,
                       n_methods=rng.choice((3, 5, 9)), noise=rng.choice((0.0, 0.02, 0.05, 0.08, 0.10)),
                       base_rate=rng.choice((0.0, 0.0, 0.1, 0.2)), n_overrides=overrides,
                       override_share=round(rng.uniform(0.2, 0.4), 2), seed=rng.randrange(1_000_000),
                       train=train, val=val, test=test, p_right=right, p_junk=junk, p_contradict=contradict,
                       p_duplicate=duplicate)


def name(index: int) -> str:
    """The benchmark name of drawn world `index`: ``drawn<index>``."""
    return f"{PREFIX}{index}"


def parse(label: str) -> int | None:
    """The index in a ``drawn<index>`` name, or None if `label` is not one."""
    digits = label[len(PREFIX):]
    return int(digits) if label.startswith(PREFIX) and digits.isdigit() else None


def call_budget(config: WorldConfig) -> int:
    """A solver-call budget in proportion to the world's size, as for the named presets (8 calls a task and 60
    more, between 120 and 1,500, rounded to tens)."""
    tasks = sum(config.category_sizes())
    return int(min(1500, max(120, round(8 * tasks + 60, -1))))
