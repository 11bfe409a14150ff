"""Section-parallel mode: rollout workers own disjoint sections of one hot artifact, so their edits never clash.

Each training task names the section it exercises (``task.meta["section"]``, a heading title). The sections
are dealt out to the rollout workers in sorted order (section i goes to worker i mod n); a worker rolls out only
on the tasks of its sections (`SectionOwners.tasks_of`), and a diff from a worker that touches a section owned by
another worker is refused before any evaluation (`SectionOwners.refusal`). A section no task names (a new one a
proposal writes) belongs to the worker a stable hash of its title picks. In a library run the sections are those of
the member the edit names. Set it with ``RunConfig(parallel="sections")``; the artifact's strategy must edit
sections (`Sections`, scope ``section``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentgrad.core.diff import Diff
from agentgrad.core.units import Scope, normalise
from agentgrad.errors import ConfigError

SECTION_FIELD = "section"


def worker_index(worker: str) -> int | None:
    """The index in a runtime's worker name (``worker-3`` -> 3); None for any other author."""
    prefix, _, number = worker.rpartition("-")
    return int(number) if prefix == "worker" and number.isdigit() else None


@dataclass(frozen=True)
class SectionOwners:
    """Which rollout worker owns which section.

    Args:
        workers: how many rollout workers there are.
        assigned: section key (the normalised heading title) -> the worker that owns it.
        sections: training task id -> the key of the section it exercises.
    """

    workers: int
    assigned: Mapping[str, int]
    sections: Mapping[str, str]

    @classmethod
    def of(cls, tasks: Mapping[str, Any], train: Sequence[str], workers: int) -> SectionOwners:
        """Deal the sections the training tasks name out to `workers` workers; `ConfigError` if a task names
        none, or if there are fewer sections than workers (a worker would own nothing to learn)."""
        sections: dict[str, str] = {}
        for task_id in train:
            meta = getattr(tasks[task_id], "meta", {}) or {}
            title = meta.get(SECTION_FIELD)
            if not isinstance(title, str) or not title.strip():
                raise ConfigError(f"section-parallel mode: training task {task_id!r} names no section "
                                  f"(set task.meta[{SECTION_FIELD!r}] to the heading title it exercises)")
            sections[task_id] = normalise(title)
        keys = sorted(set(sections.values()))
        if len(keys) < workers:
            raise ConfigError(f"section-parallel mode: {len(keys)} sections for {workers} rollout workers; use at "
                              "most as many workers as sections")
        return cls(workers, {key: index % workers for index, key in enumerate(keys)}, sections)

    def owner(self, key: str) -> int:
        """The worker that owns section `key`."""
        found = self.assigned.get(key)
        if found is not None:
            return found
        return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % self.workers

    def tasks_of(self, worker: int) -> list[str]:
        """The training tasks of the sections `worker` owns."""
        return [t for t, key in self.sections.items() if self.owner(key) == worker]

    def refusal(self, diff: Diff) -> str | None:
        """Why `diff` may not be taken from its author (a section of another worker), or None."""
        worker = worker_index(diff.author)
        if worker is None:
            return None
        for op in diff.ops:
            if op.scope is not Scope.SECTION:
                return f"section-parallel mode: worker {worker} may only edit sections, not a {op.scope.value}"
            owner = self.owner(op.key)
            if owner != worker:
                return f"section {op.key!r} belongs to worker {owner}, not to worker {worker}"
        return None
