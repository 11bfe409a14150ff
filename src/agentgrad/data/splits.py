"""Deterministic train / validation / test splits of a task set, optionally stratified by a label.

Each task's place is fixed by a hash of the seed and its id, so a split does not depend on the order of the
input, and the same seed always gives the same split. Split sizes are apportioned by largest remainders: each
split holds ``fraction * n`` tasks rounded up or down (per label, when stratified).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from agentgrad.core._checks import function, integer, is_number, items, text
from agentgrad.data.errors import DataError
from agentgrad.data.task import Task, check_unique
from agentgrad.errors import ConfigError

NAMES = ("train", "val", "test")


@dataclass(frozen=True)
class Splits:
    """Three disjoint task tuples that together hold the whole set, each in the input's order.

    Args:
        train: tasks proposers learn from.
        val: tasks the optimizer accepts or rejects changes on (never empty).
        test: held-out tasks for the final report.
        protocol: how the split was made, e.g. ``"train/val/test 50/25/25, seed 0"``.
    """

    train: tuple[Task, ...]
    val: tuple[Task, ...]
    test: tuple[Task, ...]
    protocol: str

    def __post_init__(self) -> None:
        for name in NAMES:
            object.__setattr__(self, name, items(getattr(self, name), f"Splits.{name}", Task, error=DataError))
        text(self.protocol, "Splits.protocol", empty=True, error=DataError)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready record of the split: the task ids of each part and the protocol."""
        return {"train": [t.id for t in self.train], "val": [t.id for t in self.val],
                "test": [t.id for t in self.test], "protocol": self.protocol}


def _check_fractions(fractions: Sequence[float]) -> tuple[float, float, float]:
    values = items(fractions, "fractions (train, val, test)", (int, float))
    if len(values) != 3 or not all(is_number(f, finite=False) for f in values):
        raise ConfigError(f"fractions must be three numbers (train, val, test), got {fractions!r}")
    if any(not math.isfinite(f) or f < 0 for f in values) or not math.isclose(sum(values), 1.0, abs_tol=1e-9):
        raise ConfigError(f"fractions must be >= 0 and sum to 1, got {fractions!r}")
    if values[1] <= 0:
        raise ConfigError(f"the validation fraction must be > 0, got {fractions!r}")
    return float(values[0]), float(values[1]), float(values[2])


def _rank(seed: int, task: Task) -> str:
    return hashlib.sha256(f"{seed}\x00{task.id}".encode()).hexdigest()


def _apportion(size: int, fractions: tuple[float, ...], behind: list[float]) -> list[int]:
    """Sizes of the parts of a group of `size`: floors, then one more for the parts that are most behind.

    `behind` is how far each part is below its share so far (over earlier groups); it breaks ties so that
    rounding does not favour the same part in every group.
    """
    exact = [f * size for f in fractions]
    counts = [math.floor(x) for x in exact]
    extra = size - sum(counts)
    order = sorted(range(3), key=lambda i: (exact[i] <= counts[i], -(exact[i] - counts[i] + behind[i]), i))
    for i in order[:extra]:
        counts[i] += 1
    for i in range(3):
        behind[i] += exact[i] - counts[i]
    return counts


def _groups(tasks: list[Task], stratify: Callable[[Task], Hashable] | None) -> list[list[Task]]:
    if stratify is None:
        return [tasks]
    function(stratify, "stratify (a function task -> label)", error=DataError)
    groups: dict[Hashable, list[Task]] = {}
    for task in tasks:
        try:
            groups.setdefault(stratify(task), []).append(task)
        except Exception as exc:  # the user's function, or a label that cannot be a dict key
            raise DataError(f"stratify failed on task {task.id!r}: {type(exc).__name__}: {exc} (it must return a "
                            "hashable label for every task)") from exc
    return list(groups.values())


def _percent(fraction: float) -> str:
    return f"{fraction * 100:.4g}"


def split(tasks: Sequence[Task], *, fractions: Sequence[float] = (0.5, 0.25, 0.25), seed: int = 0,
          stratify: Callable[[Task], Hashable] | None = None) -> Splits:
    """Split `tasks` into train, validation and test parts.

    Args:
        tasks: the set; ids must be unique.
        fractions: the shares of train, val and test (>= 0, summing to 1, val > 0).
        seed: picks which tasks go where; the same seed and ids give the same split.
        stratify: a function task -> label; each label's tasks are then split in the same proportions
            (every part holds within one of its share of every label).
    Raises `DataError` when the set is too small for a non-empty validation part.
    """
    shares = _check_fractions(fractions)
    integer(seed, "seed")
    tasks = items(tasks, "tasks", Task, error=DataError)
    ordered = sorted(check_unique(tasks), key=lambda t: _rank(seed, t))
    place: dict[str, int] = {}
    behind = [0.0, 0.0, 0.0]
    for group in _groups(ordered, stratify):
        counts = _apportion(len(group), shares, behind)
        bounds = [0, counts[0], counts[0] + counts[1], len(group)]
        for part in range(3):
            place.update((t.id, part) for t in group[bounds[part]:bounds[part + 1]])
    parts: tuple[list[Task], list[Task], list[Task]] = ([], [], [])
    for task in tasks:
        parts[place[task.id]].append(task)
    if not parts[1]:
        raise DataError(f"{len(tasks)} tasks are too few for a non-empty validation split at "
                        f"fractions {'/'.join(_percent(f) for f in shares)}; add tasks or raise the val fraction")
    protocol = f"{'/'.join(NAMES)} {'/'.join(_percent(f) for f in shares)}, seed {seed}"
    if stratify is not None:
        protocol += ", stratified"
    return Splits(tuple(parts[0]), tuple(parts[1]), tuple(parts[2]), protocol)
