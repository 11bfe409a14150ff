"""ACE's playbook: itemised bullets with ids, their helpful / harmful counters, and the grow-and-refine steps.

The playbook is the artifact's text, one ``- <id>: <content>`` line per bullet (`KeyedRules` units: the id is the
key, so an edit names the bullet it touches). Ids follow the released code: a section slug and a running number
(``strat-00007``). The counters are the bullets' metadata; they live in the agent's state, not in the text, so a
counter that ticks is no new text for the engine to evaluate. De-duplication compares bullet contents word for
word (difflib's ratio), standing in for the released code's sentence embeddings.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from difflib import SequenceMatcher
from typing import Any

from agentgrad.core.units import Scope, parse
from agentgrad.errors import InvalidProposalError, StateDictError
from agentgrad.strategies.keyed import split_entry

SECTIONS: Mapping[str, str] = {"strategies_and_insights": "strat", "common_mistakes_to_avoid": "err",
                               "problem_solving_heuristics": "prob", "context_clues_and_indicators": "ctx",
                               "others": "misc"}
TAGS = ("helpful", "harmful", "neutral")
_FENCED_JSON = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL | re.IGNORECASE)


@dataclass(frozen=True)
class Bullet:
    """One playbook bullet: its id and its content."""

    id: str
    content: str


@dataclass(frozen=True)
class Count:
    """How often a bullet was found helpful and harmful."""

    helpful: int = 0
    harmful: int = 0

    @property
    def utility(self) -> int:
        return self.helpful - self.harmful


def bullets(text: str) -> list[Bullet]:
    """The bullets of a playbook text, in order (lines that are no ``id: content`` entry are not bullets)."""
    found = []
    for segment in parse(Scope.KEY, text).segments:
        if segment.key is not None:
            entry = split_entry(segment.text)
            found.append(Bullet(segment.key, entry.value))
    return found


def tokens(text: str) -> int:
    """A rough token count (four characters a token), for the playbook's token budget."""
    return (len(text) + 3) // 4


def similarity(a: str, b: str) -> float:
    """How alike two bullet contents are, word for word, case-folded (0 to 1)."""
    words_a, words_b = a.casefold().rstrip(".!; ").split(), b.casefold().rstrip(".!; ").split()
    return SequenceMatcher(None, words_a, words_b, autojunk=False).ratio()


def section_slug(section: str) -> str:
    """The id prefix of a section (an unknown section files under "others", as in the released code)."""
    key = re.sub(r"[^a-z0-9]+", "_", section.casefold().replace("&", "and")).strip("_")
    return SECTIONS.get(key, SECTIONS["others"])


class Counters:
    """Each bullet's helpful and harmful counts, by id.

    State: the counts (`state_dict`).
    """

    def __init__(self) -> None:
        self.counts: dict[str, Count] = {}

    def get(self, bullet_id: str) -> Count:
        return self.counts.get(bullet_id, Count())

    def tag(self, bullet_id: str, tag: str) -> None:
        """Apply one reflector tag: "helpful" or "harmful" adds one to that counter; "neutral" changes nothing."""
        count = self.get(bullet_id)
        if tag == "helpful":
            self.counts[bullet_id] = replace(count, helpful=count.helpful + 1)
        elif tag == "harmful":
            self.counts[bullet_id] = replace(count, harmful=count.harmful + 1)

    def credit(self, bullet_id: str, helpful: int, harmful: int) -> None:
        """Add measured outcomes: tasks a bullet won (`helpful`) and lost (`harmful`) when it was tested."""
        count = self.get(bullet_id)
        self.counts[bullet_id] = Count(count.helpful + max(0, helpful), count.harmful + max(0, harmful))

    def state_dict(self) -> dict[str, list[int]]:
        return {k: [c.helpful, c.harmful] for k, c in self.counts.items()}

    def load_state_dict(self, data: Mapping[str, Any]) -> None:
        try:
            self.counts = {str(k): Count(int(v[0]), int(v[1])) for k, v in data.items()}
        except (TypeError, ValueError, IndexError) as exc:
            raise StateDictError(f"ace: malformed bullet counters ({exc})") from exc


def shown(items: Sequence[Bullet], counters: Counters) -> str:
    """The bullets as the reflector and the curator read them: ``[id] helpful=H harmful=X :: content``."""
    lines = [f"[{b.id}] helpful={counters.get(b.id).helpful} harmful={counters.get(b.id).harmful} :: {b.content}"
             for b in items]
    return "\n".join(lines) or "(the playbook is empty)"


def stats(items: Sequence[Bullet], counters: Counters) -> str:
    """The playbook's statistics the curator is shown (counts of bullets by standing, as the released code)."""
    counts = [counters.get(b.id) for b in items]
    return json.dumps({"total_bullets": len(items),
                       "high_performing": sum(1 for c in counts if c.helpful > 5 and c.harmful < 2),
                       "problematic": sum(1 for c in counts if c.harmful >= c.helpful and c.harmful > 0),
                       "unused": sum(1 for c in counts if c.helpful + c.harmful == 0)})


def json_object(reply: str, what: str) -> dict[str, Any]:
    """The JSON object in a model's reply (the whole reply, a fenced block, or the first ``{...}``)."""
    candidates = [reply.strip(), *_FENCED_JSON.findall(reply)]
    start, end = reply.find("{"), reply.rfind("}")
    if 0 <= start < end:
        candidates.append(reply[start:end + 1])
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    raise InvalidProposalError(f"ace: the {what}'s reply holds no JSON object: {reply[:120]!r}")


def fresh(additions: Iterable[tuple[str, str]], existing: Sequence[Bullet], threshold: float
          ) -> list[tuple[str, str]]:
    """The (section, content) additions that duplicate neither a bullet of the playbook nor an earlier addition
    (`similarity` at least `threshold`)."""
    kept: list[tuple[str, str]] = []
    for section, content in additions:
        seen = [b.content for b in existing] + [c for _, c in kept]
        if all(similarity(content, other) < threshold for other in seen):
            kept.append((section, content))
    return kept


def duplicates(items: Sequence[Bullet], counters: Counters, threshold: float) -> list[str]:
    """Ids of bullets that repeat an earlier bullet (the one of the pair with the lower utility goes)."""
    gone: set[str] = set()
    for i, a in enumerate(items):
        for b in items[i + 1:]:
            if a.id in gone or b.id in gone or similarity(a.content, b.content) < threshold:
                continue
            gone.add(b.id if counters.get(b.id).utility <= counters.get(a.id).utility else a.id)
    return [b.id for b in items if b.id in gone]


def harmful(items: Sequence[Bullet], counters: Counters, at: int) -> list[str]:
    """Ids of bullets tagged harmful at least `at` times and more often than helpful."""
    return [b.id for b in items if counters.get(b.id).harmful >= at and counters.get(b.id).utility < 0]


def over_budget(items: Sequence[Bullet], counters: Counters, budget: int, *, keep: Iterable[str] = ()) -> list[str]:
    """Ids to drop, lowest utility first (then oldest), until the bullets fit in `budget` tokens; `keep` stays."""
    kept = set(keep)
    size = sum(tokens(f"- {b.id}: {b.content}\n") for b in items)
    drop: list[str] = []
    for bullet in sorted((b for b in items if b.id not in kept), key=lambda b: (counters.get(b.id).utility, b.id)):
        if size <= budget:
            break
        size -= tokens(f"- {bullet.id}: {bullet.content}\n")
        drop.append(bullet.id)
    return drop
