"""EvoSkill's frontier: the top-K skill-library candidates by validation score, and the choice of a parent.

As in EvoSkill's released code (`ProgramManager.update_frontier` and `select_from_frontier`): a candidate joins
while the frontier has room, later only by beating its worst member (which it then replaces); the parent of the
next proposal is the best member ("best", the default), a random one ("random"), or the members in rank order in
turn ("round_robin").
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from agentgrad.errors import ConfigError, StateDictError

SELECTIONS = ("best", "random", "round_robin")


@dataclass(frozen=True)
class Member:
    """A frontier member: its label, its text (what the solver sees: a skills text or a packed library), its
    score, and the head it was proposed against (None for a head), which its score is measured from."""

    label: str
    text: str
    score: float
    base: str | None = None


Rescore = Callable[[Member], float | None]  # a member's current score, None if unknown


class Frontier:
    """At most `size` members, ranked by score.

    Args:
        size: K, the most members kept.
        selection: "best", "random" or "round_robin" (see the module doc).
    State: the members (`state_dict`).
    """

    def __init__(self, size: int = 3, selection: str = "best") -> None:
        if not isinstance(size, int) or size < 1:
            raise ConfigError(f"evoskill: the frontier size must be an int >= 1, got {size!r}")
        if selection not in SELECTIONS:
            raise ConfigError(f"evoskill: selection must be one of {SELECTIONS}, got {selection!r}")
        self.size, self.selection = size, selection
        self.members: list[Member] = []

    def __contains__(self, text: object) -> bool:
        return any(m.text == text for m in self.members)

    def admit(self, member: Member) -> bool:
        """Add `member` if there is room or it beats the worst member (which leaves); True if it is in now."""
        for index, old in enumerate(self.members):
            if old.text == member.text:
                self.members[index] = replace(old, score=member.score)
                return True
        if len(self.members) < self.size:
            self.members.append(member)
            return True
        worst = min(range(len(self.members)), key=lambda i: (self.members[i].score, -i))
        if member.score > self.members[worst].score:
            self.members[worst] = member
            return True
        return False

    def ranked(self, rescore: Rescore, head: str | None = None) -> list[Member]:
        """The members with fresh scores, best first (ties: the head, then the newer)."""
        fresh = []
        for member in self.members:
            score = rescore(member)
            fresh.append(member if score is None else replace(member, score=score))
        self.members = fresh
        order = sorted(range(len(fresh)), key=lambda i: (fresh[i].score, fresh[i].text == head, i), reverse=True)
        return [fresh[i] for i in order]

    def select(self, rescore: Rescore, rng: random.Random, turn: int, head: str | None = None) -> Member:
        """The parent of the next proposal, by the selection rule; `ConfigError` on an empty frontier."""
        ranked = self.ranked(rescore, head)
        if not ranked:
            raise ConfigError("evoskill: the frontier is empty (the head joins it before the first proposal)")
        if self.selection == "random":
            return rng.choice(ranked)
        if self.selection == "round_robin":
            return ranked[turn % len(ranked)]
        return ranked[0]

    def state_dict(self) -> list[dict[str, Any]]:
        return [{"label": m.label, "text": m.text, "score": m.score, "base": m.base} for m in self.members]

    def load_state_dict(self, data: object) -> None:
        if not isinstance(data, list) or not all(isinstance(m, Mapping) for m in data):
            raise StateDictError("evoskill: the frontier must be a list of members")
        try:
            self.members = [Member(str(m["label"]), str(m["text"]), float(m["score"]),
                                   None if m.get("base") is None else str(m["base"])) for m in data]
        except (KeyError, TypeError, ValueError) as exc:
            raise StateDictError(f"evoskill: malformed frontier member ({exc})") from exc
