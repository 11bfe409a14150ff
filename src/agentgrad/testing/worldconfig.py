"""`WorldConfig`: the shape of a reference world (`testing.world`), and the seeded draws everything in it comes
from (`draw_float`, `pick`)."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, fields
from typing import Any

from agentgrad.core._checks import integer, number, probability
from agentgrad.errors import ConfigError

SPLITS = ("train", "val", "test")
_PROBABILITIES = ("noise", "base_rate", "p_right", "p_junk", "p_contradict", "p_duplicate", "train", "val", "test",
                  "override_share", "format_share", "p_bundle", "rule_reach", "flaky_share", "flaky_noise")


def draw_float(*parts: object) -> float:
    """A uniform number in [0, 1) that depends only on `parts` (SHA-256 of their joined text)."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def pick(u: float, count: int) -> int:
    """An index in range(count) from a uniform `u` in [0, 1)."""
    return min(int(u * count), count - 1)


@dataclass(frozen=True)
class WorldConfig:
    """The shape of a reference world.

    Args:
        n_categories: hidden task categories (named "geometry", "dates", ... then "cat12", "cat13", ...).
        tasks_per_category: tasks in each category.
        n_methods: methods to choose from per category (one is right; at least 2, so a wrong one exists).
        noise: probability a solve outcome flips, redrawn for every distinct text (a blocked category never flips).
        base_rate: share of tasks solved even without their category's rule (fixed per task).
        p_right, p_junk, p_contradict, p_duplicate: rates of the proposal kinds (they sum to 1).
        seed: everything random derives from it.
        train, val, test: split fractions (they sum to 1), applied within each category (and within its special
            case, when it has one).
        zipf: category sizes fall as 1/rank**zipf: the category of rank r (1-based) has
            ``max(1, round(tasks_per_category / r**zipf))`` tasks (0: every category has `tasks_per_category`).
        n_overrides: the first (largest) this many categories have a special case needing an override rule.
        override_share: the share of such a category's tasks that are its special case (at least one).
        format_share: the share of all tasks (drawn per task) whose answer comes out in the wrong form unless the
            skill holds the format rule ``format: use method <m>``: one rule for every category, whose effect
            reaches the tasks least like the one it was proposed for (0: no format rule).
        p_bundle: the chance that a proposal (of any kind) also carries a junk tip on a line of its own, as a
            model's proposal often bundles a generic tip with the fix it means.
        rule_reach: the share of a category's ordinary tasks (drawn per task) that its right rule solves; the rest
            it does not reach, as if there were no rule (1: every task, as a model that follows the rule each time;
            below 1, as a model that a rule helps on some inputs only). A special case's override is unaffected.
        free_text: the skill is free text, rules appended as bullets (`AppendRules`, the default strategy of
            `evolve`) rather than keyed lines: a rule for a category the skill already has stands next to the old
            one, and the solver follows the last line of a category (as a model follows the latest instruction).
        flaky_share: the share of tasks (drawn per task) whose answers flip at `flaky_noise` instead of `noise`, as
            a model's answers shift most on the borderline inputs: the tasks a run sees fail are then more often
            flaky ones than the share says, and so are the origin tasks of its proposals (0: noise is uniform).
        flaky_noise: the flip rate of the flaky tasks.
    """

    n_categories: int = 8
    tasks_per_category: int = 12
    n_methods: int = 9
    noise: float = 0.05
    base_rate: float = 0.0
    p_right: float = 0.5
    p_junk: float = 0.2
    p_contradict: float = 0.15
    p_duplicate: float = 0.15
    seed: int = 0
    train: float = 0.5
    val: float = 0.25
    test: float = 0.25
    zipf: float = 0.0
    n_overrides: int = 0
    override_share: float = 0.25
    format_share: float = 0.0
    p_bundle: float = 0.0
    free_text: bool = False
    rule_reach: float = 1.0
    flaky_share: float = 0.0
    flaky_noise: float = 0.3

    def __post_init__(self) -> None:
        for name, low in (("n_categories", 1), ("tasks_per_category", 1), ("n_methods", 2), ("seed", None)):
            integer(getattr(self, name), f"WorldConfig.{name}", low=low)
        for name in _PROBABILITIES:
            probability(getattr(self, name), f"WorldConfig.{name}")
        for group in (("p_right", "p_junk", "p_contradict", "p_duplicate"), SPLITS):
            total = sum(getattr(self, name) for name in group)
            if not math.isclose(total, 1.0, abs_tol=1e-9):
                raise ConfigError(f"WorldConfig: {' + '.join(group)} must sum to 1, got {total!r}")
        if not self.rule_reach > 0:
            raise ConfigError(f"WorldConfig.rule_reach must be above 0, got {self.rule_reach!r}")
        number(self.zipf, "WorldConfig.zipf", low=0)
        integer(self.n_overrides, "WorldConfig.n_overrides", low=0, high=self.n_categories)
        if not isinstance(self.free_text, bool):
            raise ConfigError(f"WorldConfig.free_text must be a bool, got {self.free_text!r}")

    def category_sizes(self) -> tuple[int, ...]:
        """The number of tasks of each category, largest first (all `tasks_per_category` when zipf is 0)."""
        if not self.zipf:
            return (self.tasks_per_category,) * self.n_categories
        return tuple(max(1, round(self.tasks_per_category / (rank + 1) ** self.zipf))
                     for rank in range(self.n_categories))

    def to_dict(self) -> dict[str, Any]:
        """The config as a JSON-ready dict (`WorldConfig(**d)` rebuilds it)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}
