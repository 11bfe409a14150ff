"""A simulated reference world for tests and benchmarks: hidden task categories, a solver and a proposer.

Every task belongs to a hidden category, and each category has one correct method. The solver succeeds on a task
when the skill holds the keyed rule ``<category>: use method <m>`` with the right method; a rule with a wrong
method blocks the category. The proposer answers a task with the right rule, a junk tip, a contradictory rule or a
duplicate of a rule already there, at configured rates.

Optional shapes (off by default): Zipf-like category sizes (`zipf`: the category of rank r has about
``tasks_per_category / r**zipf`` tasks, so the rarest have only a few), and override rules (`n_overrides`): a
share of the tasks of the largest categories is a special case that needs both the category's rule and the
override line ``<category> exception: use method <m>``; the override alone does nothing. And a format rule
(`format_share`): a share of all tasks needs ``format: use method <m>`` besides whatever solves it, so one rule
helps every category at once (an edit whose effect reaches far beyond the tasks like its origin). And a free-text
skill (`free_text`): rules are appended as bullets by `AppendRules`, so a new rule for a category stands next to
the old one, and the solver follows the last line of each category.

Everything is a pure function of the seed: draws come from SHA-256 of (seed, purpose, task id, ...), never from
a shared random generator, so the same text and task always score the same.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Literal

from agentgrad.core.artifact import Artifact, Kind, content_hash
from agentgrad.core.diff import apply_ops
from agentgrad.core.ops import Op
from agentgrad.core.units import Scope, normalise, parse
from agentgrad.errors import ConfigError, InvalidEvidenceError
from agentgrad.strategies.base import UnitStrategy
from agentgrad.strategies.keyed import KeyedRules, split_entry
from agentgrad.strategies.rules import AppendRules
from agentgrad.testing.worldconfig import SPLITS, draw_float, pick
from agentgrad.testing.worldconfig import WorldConfig as WorldConfig  # re-exported: its home before

ProposalKind = Literal["right", "junk", "contradict", "duplicate"]
KINDS: tuple[ProposalKind, ...] = ("right", "junk", "contradict", "duplicate")
CATEGORY_NAMES = ("geometry", "dates", "units", "algebra", "probability", "strings", "sorting", "graphs",
                  "parsing", "finance", "physics", "logic")
JUNK_TIPS = ("be concise", "show your work", "restate the question", "check spelling", "use short sentences",
             "think step by step", "prefer plain words", "number your steps")
OVERRIDE_SUFFIX = " exception"
FORMAT_KEY = "format"


@dataclass(frozen=True)
class WorldTask:
    """One task: its id (``t0042``), its hidden category, the prompt a solver would see, and whether it is its
    category's special case (which needs the override rule too)."""

    id: str
    category: str
    prompt: str
    special: bool = False


@dataclass(frozen=True)
class WorldProposal:
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
        overrides: override key (``<category> exception``) → its correct method, for the categories that have a
            special case (none by default).
        format_method: the format rule's method (None: the world has no format rule).
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
            {c: 1 + pick(draw_float(seed, "method", c), self.config.n_methods) for c in self.categories})
        self.overrides: Mapping[str, int] = MappingProxyType(
            {c + OVERRIDE_SUFFIX: self._other_method(c, "override method", self.methods[c])
             for c in self.categories[:self.config.n_overrides]})
        self.format_method = self._other_method(FORMAT_KEY, "format method", 0) if self.config.format_share else None
        self.tasks: Mapping[str, WorldTask] = MappingProxyType(self._build_tasks())
        self.train, self.val, self.test = self._build_splits()
        self.artifact = Artifact("skills/solver", Kind.SKILL, "# Solver skill\n")
        self.strategy: UnitStrategy = AppendRules() if self.config.free_text else KeyedRules()

    def _other_method(self, category: str, purpose: str, avoid: int) -> int:
        """A method of `category` other than `avoid`, drawn from (seed, purpose, category)."""
        others = [m for m in range(1, self.config.n_methods + 1) if m != avoid]
        return others[pick(draw_float(self.config.seed, purpose, category), len(others))]

    def _special_counts(self, sizes: tuple[int, ...]) -> dict[str, int]:
        """Category → how many of its tasks (those numbered first) are its special case."""
        share = self.config.override_share
        return {c: min(n, max(1, round(share * n)))
                for c, n in zip(self.categories[:self.config.n_overrides], sizes, strict=False)}

    def _build_tasks(self) -> dict[str, WorldTask]:
        seed, sizes = self.config.seed, self.config.category_sizes()
        special = self._special_counts(sizes)
        pairs = [(c, k) for c, n in zip(self.categories, sizes, strict=True) for k in range(n)]
        pairs.sort(key=lambda pair: draw_float(seed, "order", *pair))
        tasks = {}
        for index, (category, k) in enumerate(pairs):
            a, b = (10 + pick(draw_float(seed, "prompt", category, k, side), 90) for side in "ab")
            task_id, is_special = f"t{index:04d}", k < special.get(category, 0)
            note = " (special case)" if is_special else ""
            tasks[task_id] = WorldTask(task_id, category, f"{category} problem {k + 1}{note}: solve the case "
                                       f"({a}, {b})", is_special)
        return tasks

    def _build_splits(self) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
        parts: dict[str, list[str]] = {name: [] for name in SPLITS}
        groups = [(c, s) for c in self.categories for s in (False, True)]
        for category, special in groups:
            ids = [t.id for t in self.tasks.values() if t.category == category and t.special is special]
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

    def override_rule(self, category: str) -> str:
        """The correct override line of `category`'s special case (KeyError if it has none)."""
        key = category + OVERRIDE_SUFFIX
        return f"{key}: use method {self.overrides[key]}"

    def task(self, task_id: str) -> WorldTask:
        """The task with `task_id`; raises `InvalidEvidenceError` for an id this world does not know."""
        try:
            return self.tasks[task_id]
        except KeyError:
            raise InvalidEvidenceError(f"the reference world has no task {task_id!r}") from None

    def format_rule(self) -> str | None:
        """The format rule's line (None: this world has none)."""
        return None if self.format_method is None else f"{FORMAT_KEY}: use method {self.format_method}"

    def needs_format(self, task_id: str) -> bool:
        """True if the task fails without the format rule (a `format_share` of tasks, drawn per task)."""
        return draw_float(self.config.seed, "format", task_id) < self.config.format_share

    def _expected(self, key: str) -> int | None:
        """The right method of a category, override or format key, None for any other key."""
        found = self.methods.get(key, self.overrides.get(key))
        return self.format_method if found is None and key == FORMAT_KEY else found

    def _is_right_value(self, key: str, value: str) -> bool:
        return normalise(value) == f"use method {self._expected(key)}"

    def _ruled(self, task: WorldTask, rules: Mapping[str, str]) -> bool | None:
        """Whether the rules solve `task` (None: no rule applies; False for a special case missing its override);
        raises `_Blocked` when a wrong rule applies."""
        value = rules.get(task.category)
        if value is not None and not self._is_right_value(task.category, value):
            raise _Blocked
        if not task.special:
            reached = self.config.rule_reach >= 1 or draw_float(self.config.seed, "reach", task.id) < \
                self.config.rule_reach
            return True if value is not None and reached else None
        key = task.category + OVERRIDE_SUFFIX
        override = rules.get(key)
        if override is not None and not self._is_right_value(key, override):
            raise _Blocked
        return None if value is None else override is not None

    def solve(self, text: str, task_id: str) -> float:
        """1.0 if a solver with skill `text` solves the task, else 0.0 (deterministic in seed, task and text).

        With the right rule for the task's category it succeeds (on the `rule_reach` share of the category's
        tasks it reaches, drawn per task; elsewhere as without it); without any rule for it, it succeeds if the task
        is one of the easy ones (a fixed `base_rate` share of tasks, drawn from the seed and task id). A special
        case needs the category's rule and its override; with the rule alone it fails, with the override alone it
        is as if there were no rule. Either outcome flips with probability `noise` (`flaky_noise` on a flaky task),
        drawn from (seed, task id, SHA-256 of `text`): any edit, junk too, redraws the flips. A wrong rule
        (category, override or format) for the task always fails, noise or not. A task that needs the format rule
        fails without it, as if unsolved.
        """
        clean = self._clean(text, task_id)
        if clean is None:
            return 0.0
        solved = clean
        if draw_float(self.config.seed, "noise", task_id, content_hash(text)) < self.noise_of(task_id):
            solved = not solved
        return 1.0 if solved else 0.0

    def noise_of(self, task_id: str) -> float:
        """The task's flip rate: `flaky_noise` for the `flaky_share` of tasks drawn flaky, else `noise`."""
        share = self.config.flaky_share
        if share and draw_float(self.config.seed, "flaky", task_id) < share:
            return self.config.flaky_noise
        return self.config.noise

    def _clean(self, text: str, task_id: str) -> bool | None:
        """Whether skill `text` solves the task before the answer noise; None if a wrong rule blocks it."""
        task, rules = self.task(task_id), followed(text)
        try:
            ruled = self._ruled(task, rules)
        except _Blocked:
            return None
        solved = ruled if ruled is not None else draw_float(self.config.seed, "base", task_id) < self.config.base_rate
        if self.needs_format(task_id):
            form = rules.get(FORMAT_KEY)
            if form is not None and not self._is_right_value(FORMAT_KEY, form):
                return None
            solved = solved and form is not None
        return solved

    def expected_score(self, text: str, split: str = "test") -> float:
        """The mean solve rate of skill `text` on a split averaged over the answer noise: what the text has
        learned, apart from the luck of its own noise draw (a solved task counts 1 - noise, an unsolved one noise,
        a blocked one 0). Two texts with the same rules score the same here, and not in `score`."""
        ids = self.split(split)
        if not ids:
            raise ConfigError(f"split {split!r} has no tasks in this world")
        total = 0.0
        for task_id in ids:
            clean, noise = self._clean(text, task_id), self.noise_of(task_id)
            total += 0.0 if clean is None else 1.0 - noise if clean else noise
        return total / len(ids)

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
        """The starting skill with every category's right rule (and every override) added."""
        text = self.artifact.text
        rules = [self.right_rule(c) for c in self.categories]
        rules += [self.override_rule(c) for c in self.categories if c + OVERRIDE_SUFFIX in self.overrides]
        rules += [line for line in (self.format_rule(),) if line is not None]
        return apply_ops(text, self.strategy.ops("\n".join(rules), text))

    def audit(self, text: str) -> dict[str, int]:
        """How many ``key: value`` lines of `text` are right rules (category or override), wrong ones (a wrong
        method for a known key) and junk (a key the solver ignores)."""
        counts = {"right": 0, "wrong": 0, "junk": 0}
        for key, value in rule_lines(text):
            kind = "junk" if self._expected(key) is None else "right" if self._is_right_value(key, value) else "wrong"
            counts[kind] += 1
        return counts

    # -- the proposer ------------------------------------------------------------------------------------------

    def _kind(self, u: float) -> ProposalKind:
        rates = (self.config.p_right, self.config.p_junk, self.config.p_contradict, self.config.p_duplicate)
        total = 0.0
        for kind, rate in zip(KINDS, rates, strict=True):
            total += rate
            if u < total:
                return kind
        return next(k for k, r in zip(reversed(KINDS), reversed(rates), strict=True) if r > 0)

    def propose(self, text: str, task_id: str, draw: int) -> WorldProposal:
        """The proposer's answer to a task on skill `text`; deterministic in (seed, task id, draw) (and `text`,
        which a duplicate copies a rule from). With `p_bundle`, it may carry a junk tip besides."""
        said = self._said(text, task_id, draw)
        seed = self.config.seed
        if draw_float(seed, "bundle", task_id, draw) >= self.config.p_bundle:
            return said
        tip = JUNK_TIPS[pick(draw_float(seed, "bundled tip", task_id, draw), len(JUNK_TIPS))]
        number = 1 + pick(draw_float(seed, "bundled n", task_id, draw), 99)
        return replace(said, text=f"{said.text}\ntip {number}: {tip}")

    def _said(self, text: str, task_id: str, draw: int) -> WorldProposal:
        """The proposal itself (`propose` without a bundled tip)."""
        task, seed = self.task(task_id), self.config.seed
        kind = self._kind(draw_float(seed, "kind", task_id, draw))
        detail = draw_float(seed, "detail", task_id, draw)
        if kind == "contradict":
            key = task.category
            if task.special and draw_float(seed, "target", task_id, draw) < 0.5:
                key += OVERRIDE_SUFFIX
            right = self._expected(key)
            wrong = [m for m in range(1, self.config.n_methods + 1) if m != right]
            return WorldProposal(f"{key}: use method {wrong[pick(detail, len(wrong))]}", kind, task.category)
        if kind == "junk":
            tip = JUNK_TIPS[pick(draw_float(seed, "tip", task_id, draw), len(JUNK_TIPS))]
            return WorldProposal(f"tip {1 + pick(detail, 99)}: {tip}", kind, task.category)
        present = [split_entry(s.text) for s in parse(Scope.KEY, text).segments if s.key is not None]
        if kind == "duplicate" and present:
            entry = present[pick(detail, len(present))]
            return WorldProposal(f"{entry.key}: {entry.value}", kind, task.category)
        return WorldProposal(self._right_text(task, text, draw), kind, task.category)

    def _right_text(self, task: WorldTask, text: str, draw: int) -> str:
        """The right answer to `task`: its category's rule; for a special case, the override once the rule is
        there, else the rule, the override alone or both lines (a third each)."""
        base, form = self.right_rule(task.category), self.format_rule()
        if form is not None and self.needs_format(task.id) and followed(text).get(FORMAT_KEY) is None \
                and draw_float(self.config.seed, "format proposal", task.id, draw) < 0.5:
            return form
        if not task.special:
            return base
        override = self.override_rule(task.category)
        value = followed(text).get(task.category)
        if value is not None and self._is_right_value(task.category, value):
            return override
        choice = pick(draw_float(self.config.seed, "pair", task.id, draw), 3)
        return (base, override, f"{base}\n{override}")[choice]

    # -- reading ops -------------------------------------------------------------------------------------------

    def _written(self, op: Op) -> tuple[str, str] | None:
        """(key, value) that a KEY op (or, in a free-text skill, a RULE op) writes, or None for other ops."""
        if op.scope not in (Scope.KEY, Scope.RULE) or op.new is None:
            return None
        entry = split_entry(op.new)
        return normalise(entry.key), entry.value

    def is_junk(self, op: Op) -> bool:
        """True if `op` writes a key that is no category or override (the solver ignores it)."""
        written = self._written(op)
        return written is not None and self._expected(written[0]) is None

    def is_right(self, op: Op) -> bool:
        """True if `op` writes the right rule of a category (or of an override)."""
        written = self._written(op)
        return written is not None and self._expected(written[0]) is not None and self._is_right_value(*written)

    def is_contradictory(self, op: Op) -> bool:
        """True if `op` writes a wrong method for a category or override (which blocks the tasks it covers)."""
        written = self._written(op)
        return written is not None and self._expected(written[0]) is not None and not self._is_right_value(*written)


def rule_lines(text: str) -> list[tuple[str, str]]:
    """(normalised key, value) of every ``key: value`` line of `text`, in order (bullets allowed)."""
    return [(seg.key, split_entry(seg.text).value) for seg in parse(Scope.KEY, text).segments if seg.key is not None]


def followed(text: str) -> dict[str, str]:
    """The rule the solver follows for each key: the last line of that key (a keyed skill has only one)."""
    return dict(rule_lines(text))


class _Blocked(Exception):
    """A wrong rule applies to the task: it fails, noise or not."""
