"""A simulated reference world for tests and benchmarks: hidden task categories, a solver and a proposer.

Every task belongs to a hidden category, and each category has one correct method. The solver succeeds on a task
when the skill holds the keyed rule ``<category>: use method <m>`` with the right method; a rule with a wrong
method blocks the category. The proposer answers a task with the right rule, a junk tip, a contradictory rule or a
duplicate of a rule already there, at configured rates.

Everything is a pure function of the seed: draws come from SHA-256 of (seed, purpose, task id, ...), never from
a shared random generator, so the same text and task always score the same.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any, Literal

from agentgrad.core.artifact import Artifact, Kind, content_hash
from agentgrad.core.diff import apply_ops
from agentgrad.core.ops import Op
from agentgrad.core.units import Scope, normalise, parse
from agentgrad.errors import ConfigError, InvalidEvidenceError
from agentgrad.strategies.keyed import KeyedRules, entries, split_entry

ProposalKind = Literal["right", "junk", "contradict", "duplicate"]
KINDS: tuple[ProposalKind, ...] = ("right", "junk", "contradict", "duplicate")
SPLITS = ("train", "val", "test")
CATEGORY_NAMES = ("geometry", "dates", "units", "algebra", "probability", "strings", "sorting", "graphs",
                  "parsing", "finance", "physics", "logic")
JUNK_TIPS = ("be concise", "show your work", "restate the question", "check spelling", "use short sentences",
             "think step by step", "prefer plain words", "number your steps")
_PROBABILITIES = ("noise", "base_rate", "p_right", "p_junk", "p_contradict", "p_duplicate", "train", "val", "test")


def draw_float(*parts: object) -> float:
    """A uniform number in [0, 1) that depends only on `parts` (SHA-256 of their joined text)."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _pick(u: float, count: int) -> int:
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
        train, val, test: split fractions (they sum to 1), applied within each category.
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

    def __post_init__(self) -> None:
        for name, low in (("n_categories", 1), ("tasks_per_category", 1), ("n_methods", 2), ("seed", None)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or (low is not None and value < low):
                raise ConfigError(f"WorldConfig.{name} must be an int{f' >= {low}' if low else ''}, got {value!r}")
        for name in _PROBABILITIES:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise ConfigError(f"WorldConfig.{name} must be a probability in [0, 1], got {value!r}")
        for group in (("p_right", "p_junk", "p_contradict", "p_duplicate"), SPLITS):
            total = sum(getattr(self, name) for name in group)
            if not math.isclose(total, 1.0, abs_tol=1e-9):
                raise ConfigError(f"WorldConfig: {' + '.join(group)} must sum to 1, got {total!r}")

    def to_dict(self) -> dict[str, Any]:
        """The config as a JSON-ready dict (`WorldConfig(**d)` rebuilds it)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class WorldTask:
    """One task: its id (``t0042``), its hidden category and the prompt a solver would see."""

    id: str
    category: str
    prompt: str


@dataclass(frozen=True)
class Proposal:
    """What the simulated proposer said: `text` for `KeyedRules`, its hidden `kind`, and the task's category."""

    text: str
    kind: ProposalKind
    category: str


def _split_sizes(count: int, config: WorldConfig) -> tuple[int, int]:
    """How many of `count` tasks go to train and to val (the rest go to test)."""
    n_train = min(count, round(config.train * count))
    n_val = min(count - n_train, round(config.val * count))
    return n_train, n_val


class ReferenceWorld:
    """A deterministic simulated world built from a `WorldConfig` (immutable once built).

    Attributes:
        config: the configuration.
        categories: the category names, in order.
        methods: category → its correct method number.
        tasks: task id → `WorldTask`.
        train, val, test: task ids of each split (sorted, stratified by category, disjoint, covering all tasks).
        artifact: the skill being trained, ``Artifact("skills/solver", Kind.SKILL, "# Solver skill\\n")``.
        strategy: `KeyedRules()`; rules are keyed lines ``<category>: use method <m>``.
    """

    def __init__(self, config: WorldConfig | None = None) -> None:
        self.config = config if config is not None else WorldConfig()
        seed, count = self.config.seed, self.config.n_categories
        self.categories = tuple(CATEGORY_NAMES[i] if i < len(CATEGORY_NAMES) else f"cat{i:02d}" for i in range(count))
        self.methods: Mapping[str, int] = MappingProxyType(
            {c: 1 + _pick(draw_float(seed, "method", c), self.config.n_methods) for c in self.categories})
        self.tasks: Mapping[str, WorldTask] = MappingProxyType(self._build_tasks())
        self.train, self.val, self.test = self._build_splits()
        self.artifact = Artifact("skills/solver", Kind.SKILL, "# Solver skill\n")
        self.strategy = KeyedRules()

    def _build_tasks(self) -> dict[str, WorldTask]:
        seed = self.config.seed
        pairs = [(c, k) for c in self.categories for k in range(self.config.tasks_per_category)]
        pairs.sort(key=lambda pair: draw_float(seed, "order", *pair))
        tasks = {}
        for index, (category, k) in enumerate(pairs):
            a, b = (10 + _pick(draw_float(seed, "prompt", category, k, side), 90) for side in "ab")
            task_id = f"t{index:04d}"
            tasks[task_id] = WorldTask(task_id, category, f"{category} problem {k + 1}: solve the case ({a}, {b})")
        return tasks

    def _build_splits(self) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
        parts: dict[str, list[str]] = {name: [] for name in SPLITS}
        for category in self.categories:
            ids = [t.id for t in self.tasks.values() if t.category == category]
            ids.sort(key=lambda task_id: draw_float(self.config.seed, "split", task_id))
            n_train, n_val = _split_sizes(len(ids), self.config)
            parts["train"] += ids[:n_train]
            parts["val"] += ids[n_train:n_train + n_val]
            parts["test"] += ids[n_train + n_val:]
        return tuple(sorted(parts["train"])), tuple(sorted(parts["val"])), tuple(sorted(parts["test"]))

    # -- the solver --------------------------------------------------------------------------------------------

    def right_rule(self, category: str) -> str:
        """The correct rule of `category`, as a ``key: value`` line."""
        return f"{category}: use method {self.methods[category]}"

    def task(self, task_id: str) -> WorldTask:
        """The task with `task_id`; raises `InvalidEvidenceError` for an id this world does not know."""
        try:
            return self.tasks[task_id]
        except KeyError:
            raise InvalidEvidenceError(f"the reference world has no task {task_id!r}") from None

    def _is_right_value(self, category: str, value: str) -> bool:
        return normalise(value) == f"use method {self.methods[category]}"

    def solve(self, text: str, task_id: str) -> float:
        """1.0 if a solver with skill `text` solves the task, else 0.0 (deterministic in seed, task and text).

        With the right rule for the task's category it succeeds; without any rule for it, it succeeds if the task
        is one of the easy ones (a fixed `base_rate` share of tasks, drawn from the seed and task id). Either
        outcome flips with probability `noise`, drawn from (seed, task id, SHA-256 of `text`): any edit, junk
        too, redraws the flips. A wrong rule for the category always fails, noise or not.
        """
        task = self.task(task_id)
        digest = content_hash(text)
        value = entries(text).get(task.category)
        if value is not None and not self._is_right_value(task.category, value):
            return 0.0
        seed = self.config.seed
        solved = value is not None or draw_float(seed, "base", task_id) < self.config.base_rate
        if draw_float(seed, "noise", task_id, digest) < self.config.noise:
            solved = not solved
        return 1.0 if solved else 0.0

    def evaluate(self, text: str, task_ids: Iterable[str]) -> dict[str, float]:
        """`solve` on each task id."""
        return {task_id: self.solve(text, task_id) for task_id in task_ids}

    def split(self, name: str) -> tuple[str, ...]:
        """The task ids of split `name` ("train", "val" or "test")."""
        if name not in SPLITS:
            raise ConfigError(f"unknown split {name!r}; expected one of {SPLITS}")
        ids: tuple[str, ...] = getattr(self, name)
        return ids

    def score(self, text: str, split: str = "val") -> float:
        """The mean solve rate of skill `text` on a split."""
        ids = self.split(split)
        if not ids:
            raise ConfigError(f"split {split!r} has no tasks in this world")
        return sum(self.evaluate(text, ids).values()) / len(ids)

    def optimal_text(self) -> str:
        """The starting skill with every category's right rule added."""
        text = self.artifact.text
        return apply_ops(text, self.strategy.ops("\n".join(self.right_rule(c) for c in self.categories), text))

    # -- the proposer ------------------------------------------------------------------------------------------

    def _kind(self, u: float) -> ProposalKind:
        rates = (self.config.p_right, self.config.p_junk, self.config.p_contradict, self.config.p_duplicate)
        total = 0.0
        for kind, rate in zip(KINDS, rates, strict=True):
            total += rate
            if u < total:
                return kind
        return next(k for k, r in zip(reversed(KINDS), reversed(rates), strict=True) if r > 0)

    def propose(self, text: str, task_id: str, draw: int) -> Proposal:
        """The proposer's answer to a task on skill `text`; deterministic in (seed, task id, draw) (and `text`,
        which a duplicate copies a rule from)."""
        task, seed = self.task(task_id), self.config.seed
        kind = self._kind(draw_float(seed, "kind", task_id, draw))
        detail = draw_float(seed, "detail", task_id, draw)
        if kind == "contradict":
            right = self.methods[task.category]
            wrong = [m for m in range(1, self.config.n_methods + 1) if m != right]
            return Proposal(f"{task.category}: use method {wrong[_pick(detail, len(wrong))]}", kind, task.category)
        if kind == "junk":
            tip = JUNK_TIPS[_pick(draw_float(seed, "tip", task_id, draw), len(JUNK_TIPS))]
            return Proposal(f"tip {1 + _pick(detail, 99)}: {tip}", kind, task.category)
        present = [split_entry(s.text) for s in parse(Scope.KEY, text).segments if s.key is not None]
        if kind == "duplicate" and present:
            entry = present[_pick(detail, len(present))]
            return Proposal(f"{entry.key}: {entry.value}", kind, task.category)
        return Proposal(self.right_rule(task.category), kind, task.category)

    # -- reading ops -------------------------------------------------------------------------------------------

    def _written(self, op: Op) -> tuple[str, str] | None:
        """(key, value) that a KEY op writes, or None for other ops."""
        if op.scope is not Scope.KEY or op.new is None:
            return None
        entry = split_entry(op.new)
        return normalise(entry.key), entry.value

    def is_junk(self, op: Op) -> bool:
        """True if `op` writes a key that is no category (the solver ignores it)."""
        written = self._written(op)
        return written is not None and written[0] not in self.methods

    def is_right(self, op: Op) -> bool:
        """True if `op` writes the right rule of a category."""
        written = self._written(op)
        return written is not None and written[0] in self.methods and self._is_right_value(*written)

    def is_contradictory(self, op: Op) -> bool:
        """True if `op` writes a wrong method for a category (which blocks that category)."""
        written = self._written(op)
        return written is not None and written[0] in self.methods and not self._is_right_value(*written)
