"""Free noise evidence: a task scored on a head and on its parent, far from what the commit between was for.

Every commit changes the text, so with a model whose answers shift with any edit, tasks the commit has nothing to
do with may still change score. Rollouts and the gate score tasks on every new head anyway; when the parent head's
score of the same task is cached and the task is far from every origin task of the commit (`Gate.far`), the pair
is one more observation of the answer noise, at no call. `NoiseWatch` collects such pairs as they are scored and
hands them over at the end of an optimizer step (so that, in the synchronous runtime, what a step sees never
depends on the order calls finished in); each (version, task) counts once. It also keeps the gate's screens
(`NoiseEstimate.screened`) until the step, for the same reason.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping

from agentgrad.core.artifact import content_hash
from agentgrad.core.evidence import Evidence, Row
from agentgrad.optim.noise import NoiseEstimate

EARLIER_DEPTH = 4  # `earlier` looks back at most this many commits
MAX_SEEN = 200_000  # (version, task) pairs remembered; past it the memory starts again (it only avoids recounts)


class NoiseWatch:
    """Collects noise pairs between each head and its parent.

    Args:
        far: `far(origin, [task])` -> the tasks of the list far from `origin` (the gate's rule).
        lookup: `lookup(text, task)` -> the cached score, or None.
    State: per committed version its parent's text hash and the commit's origin tasks; the pending pairs and
    screens; the (version, task) pairs and the screened (candidate text, task) pairs already counted.
    """

    def __init__(self, far: Callable[[str | None, list[str]], list[str]],
                 lookup: Callable[[str, str], float | None]) -> None:
        self.far, self.lookup = far, lookup
        self.lineage: dict[str, tuple[int, str, tuple[str, ...]]] = {}  # text hash -> (version, parent text, origins)
        self.pending: list[Row] = []
        self.screens: list[tuple[float, float]] = []  # (base, candidate) on a screened proposal's origin task
        self.seen: set[tuple[int, str]] = set()
        self.screened_keys: set[tuple[str, str]] = set()  # (candidate text hash, task) of the screens kept
        self._chains: dict[tuple[str, int], list[tuple[str, tuple[str, ...]]]] = {}  # `_chain`, until a commit

    def committed(self, version: int, text: str, parent: str, origins: Collection[str]) -> None:
        """Note a commit: `text` (version `version`) made from `parent` by a change proposed from `origins`
        (empty when unknown: then nothing is far, and the commit gives no pairs)."""
        self.lineage[content_hash(text)] = (version, parent, tuple(origins))
        self._chains.clear()

    def earlier(self, text: str, task_id: str, depth: int = EARLIER_DEPTH) -> float | None:
        """The cached score of `task_id` on the nearest earlier head (at most `depth` commits back) that has one, as
        long as the task is far from the origins of every commit since that head; else None. What a head likely
        scores where it was not scored itself: the commits since were for other tasks."""
        for parent, origins in self._chain(text, depth):
            if not origins or any(not self.far(origin, [task_id]) for origin in origins):
                return None
            score = self.lookup(parent, task_id)
            if score is not None:
                return score
        return None

    def _chain(self, text: str, depth: int) -> list[tuple[str, tuple[str, ...]]]:
        """The texts before `text` (at most `depth` commits back) and the origins of the commit made from each,
        remembered until the next commit: rollouts ask `earlier` of every task they pass over."""
        chain = self._chains.get((text, depth))
        if chain is None:
            chain, at = [], text
            for _ in range(depth):
                entry = self.lineage.get(content_hash(at))
                if entry is None:
                    break
                _, at, origins = entry
                chain.append((at, origins))
            if len(self._chains) >= 256:
                self._chains.clear()
            self._chains[(text, depth)] = chain
        return chain

    def scored(self, text: str, task_id: str, score: float) -> None:
        """A score was just computed; keep it as a noise pair if it qualifies."""
        entry = self.lineage.get(content_hash(text))
        if entry is None:
            return
        version, parent, origins = entry
        if not origins or (version, task_id) in self.seen:
            return
        before = self.lookup(parent, task_id)
        if before is None or any(not self.far(origin, [task_id]) for origin in origins):
            return
        if len(self.seen) >= MAX_SEEN:
            self.seen.clear()
        self.seen.add((version, task_id))
        self.pending.append(Row(f"v{version}:{task_id}", before, score))

    def screened(self, base: float, candidate: float, key: tuple[str, str] | None = None) -> bool:
        """A screen scored a proposal on its origin task: keep the pair for the next step, once per `key` (the
        candidate text's hash and the task: a screen of the same texts again is no new observation). True if kept."""
        if key is not None:
            if key in self.screened_keys:
                return False
            if len(self.screened_keys) >= MAX_SEEN:
                self.screened_keys.clear()
            self.screened_keys.add(key)
        self.screens.append((base, candidate))
        return True

    def flush(self, noise: NoiseEstimate) -> NoiseEstimate:
        """`noise` with the pending pairs and screens counted; both lists are emptied."""
        screens, self.screens = self.screens, []
        noise = noise.screened(screens) if screens else noise
        if not self.pending:
            return noise
        rows, self.pending = tuple(self.pending), []
        return noise.added([Evidence(rows, far=tuple(r.task_id for r in rows))])

    def sizes(self) -> Mapping[str, int]:
        """How much it holds (the pairs are transient: a resumed run starts collecting afresh)."""
        return {"pending": len(self.pending) + len(self.screens), "versions": len(self.lineage)}
