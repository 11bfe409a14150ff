"""`Throttle`: adaptive rollout concurrency, moved one worker at a time by what the gate's inbox shows.

Rollouts only feed the proposers, and proposals only matter once the gate evaluates them. When a proposal finds
the gate's inbox full, the gate is the bottleneck and rollouts beyond it only make work that goes stale while it
waits: one rollout worker pauses. When a gate worker finds the inbox empty, the gate is starved: one paused
worker resumes. The run slots the paused workers leave go to the gate (its calls take slots first).
"""

from __future__ import annotations

import anyio


class Throttle:
    """How many of the `maximum` rollout workers may start a rollout now (between `minimum` and `maximum`).

    State: the active count, the lowest and highest it reached, the number of moves, and the event that wakes
    paused workers.
    """

    def __init__(self, maximum: int, *, minimum: int = 1, enabled: bool = True) -> None:
        self.maximum = max(1, maximum)
        self.minimum = min(max(1, minimum), self.maximum)
        self.enabled = enabled
        self.active = self.maximum
        self.lowest = self.highest = self.active
        self.moves = 0
        self._changed = anyio.Event()

    def _set(self, active: int) -> None:
        active = max(self.minimum, min(self.maximum, active))
        if active == self.active:
            return
        self.active, self.moves = active, self.moves + 1
        self.lowest, self.highest = min(self.lowest, active), max(self.highest, active)
        self._changed.set()
        self._changed = anyio.Event()

    def backlogged(self) -> None:
        """A proposal found the gate's inbox full: one rollout worker fewer."""
        if self.enabled:
            self._set(self.active - 1)

    def starved(self) -> None:
        """A gate worker found nothing to evaluate: one rollout worker more."""
        if self.enabled:
            self._set(self.active + 1)

    async def turn(self, index: int) -> None:
        """Wait until rollout worker `index` (0-based) may start a rollout."""
        while index >= self.active:
            await self._changed.wait()

    def release_all(self) -> None:
        """Let every worker go (the run is ending: paused workers must see it and stop)."""
        self.minimum = self.maximum
        self._set(self.maximum)
