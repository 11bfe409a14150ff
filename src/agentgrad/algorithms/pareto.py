"""A per-example Pareto frontier of candidates, and GEPA's way of sampling a parent from it.

Each candidate has scores on some tasks. On each task the frontier holds the candidates with the best score
there. A candidate is dominated when, on every task whose frontier holds it, another surviving candidate is on
that frontier too (the released GEPA code removes such candidates one at a time, lowest aggregate score first).
A parent is drawn among the survivors with probability proportional to the number of tasks whose frontier holds
it: a candidate that is best on a single example keeps a chance of being built on.

>>> scores = {"a": {"t1": 1.0, "t2": 1.0, "t3": 0.0}, "b": {"t1": 0.0, "t2": 0.0, "t3": 1.0}, "c": {"t1": 1.0}}
>>> sorted(survivors(scores))
['a', 'b']
"""

from __future__ import annotations

import random
from collections.abc import Mapping


def fronts(scores: Mapping[str, Mapping[str, float]]) -> dict[str, set[str]]:
    """For each task, the candidates with the best score on it."""
    best: dict[str, float] = {}
    for table in scores.values():
        for task, value in table.items():
            best[task] = max(best.get(task, value), value)
    out: dict[str, set[str]] = {task: set() for task in best}
    for name, table in scores.items():
        for task, value in table.items():
            if value >= best[task]:
                out[task].add(name)
    return out


def _mean(table: Mapping[str, float]) -> float:
    return sum(table.values()) / len(table) if table else 0.0


def survivors(scores: Mapping[str, Mapping[str, float]]) -> set[str]:
    """The candidates on some frontier that no other surviving candidate dominates."""
    by_task = fronts(scores)
    alive = {name for front in by_task.values() for name in front}
    changed = True
    while changed:
        changed = False
        for name in sorted(alive, key=lambda n: (_mean(scores[n]), n)):
            held = [front for front in by_task.values() if name in front]
            if all(front & (alive - {name}) for front in held):
                alive.discard(name)
                changed = True
                break
    return alive


def sample_parent(scores: Mapping[str, Mapping[str, float]], rng: random.Random) -> str | None:
    """A survivor drawn with probability proportional to how many tasks' frontiers hold it (None if none)."""
    alive = survivors(scores)
    weights: dict[str, int] = {}
    for front in fronts(scores).values():
        for name in front & alive:
            weights[name] = weights.get(name, 0) + 1
    if not weights:
        return None
    names = sorted(weights)
    return rng.choices(names, weights=[weights[n] for n in names], k=1)[0]


def wins_somewhere(candidate: Mapping[str, float], archive: Mapping[str, Mapping[str, float]]) -> bool:
    """True when `candidate` beats every archived candidate on some task it was scored on (or is the first scored
    there): it would join a frontier."""
    for task, value in candidate.items():
        known = [table[task] for table in archive.values() if task in table]
        if not known or value > max(known):
            return True
    return False
