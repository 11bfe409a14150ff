"""Which tasks look like a candidate's origin task: the gate scores those first.

A proposal is written from one failing task, so its effect, if it has one, is most likely on tasks like that one
(the same kind of question, the same category of ticket). Scoring those first shows a real effect after a few
calls, where a random order would dilute it with the answer noise of unrelated tasks; the rest of the gate's plan
is a random sample that checks for regressions elsewhere.

Similarity is the cosine of TF-IDF vectors of the tasks' inputs over lower-cased word tokens. Tokens made only of
digits are left out (ids, amounts and dates link unrelated tasks by chance), and so are tokens that occur in only
one task (they link nothing, and would only shrink every similarity of that task). The order never depends on a
score, only on the inputs, so scoring the nearest tasks first keeps the acceptance test's guarantee.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens of `text`, without tokens made only of digits."""
    return [t for t in _WORD.findall(text.lower()) if not t.isdigit()]


class Locality:
    """TF-IDF neighbours among a fixed set of tasks.

    Args:
        inputs: task id -> the text the agent sees.
    State: one unit-length sparse vector per task (immutable once built) and the similarities asked for so far.
    """

    def __init__(self, inputs: Mapping[str, str]) -> None:
        counted = {task_id: Counter(tokens(text)) for task_id, text in inputs.items()}
        df: Counter[str] = Counter()
        for bag in counted.values():
            df.update(bag.keys())
        n = max(1, len(counted))
        idf = {t: math.log(n / c) for t, c in df.items() if c > 1}
        self._vectors = {task_id: _unit({t: (1 + math.log(k)) * idf[t] for t, k in bag.items() if idf.get(t)})
                         for task_id, bag in counted.items()}
        self._near: dict[str, dict[str, float]] = {}

    def similarity(self, a: str, b: str) -> float:
        """Cosine similarity of two tasks' inputs, in [0, 1] (0 for an unknown id)."""
        u, v = self._vectors.get(a, {}), self._vectors.get(b, {})
        if len(u) > len(v):
            u, v = v, u
        return sum(w * v.get(t, 0.0) for t, w in u.items())

    def similarities(self, origin: str) -> Mapping[str, float]:
        """Every other task's similarity to `origin` (only those above 0), remembered per origin."""
        found = self._near.get(origin)
        if found is None:
            found = {t: s for t in self._vectors if t != origin and (s := self.similarity(origin, t)) > 0}
            if len(self._near) >= 4096:  # bounded: a long run asks about many origins
                self._near.clear()
            self._near[origin] = found
        return found


def _unit(vector: dict[str, float]) -> dict[str, float]:
    norm = math.sqrt(sum(w * w for w in vector.values()))
    return {t: w / norm for t, w in vector.items()} if norm > 0 else {}
