"""`AppendRules`: a proposal is a list of rules; each new one is appended as a ``- rule`` bullet.

A rule already present (same normalised text) is skipped. A rule that negates an existing one ("never X" against
"always X" or "X") replaces it in place instead of standing next to it.

Negation is read by `polarity`, a deliberately small normaliser: after `normalise` (case, spaces, trailing
punctuation), a rule that starts with "never", "do not", "don't", "dont" or "avoid" is the negative of the rest; one
that starts with "always" is the positive of the rest; any other rule is the positive of itself. Two rules negate
each other when their polarities differ and the rests are equal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from agentgrad.core.ops import Action, Op
from agentgrad.core.units import Scope, normalise, unit_key
from agentgrad.errors import InvalidProposalError
from agentgrad.strategies.base import Edit, Planner, UnitStrategy

_BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])(?:\s+|$)")
_NEGATIVE = ("never ", "do not ", "don't ", "dont ", "avoid ")
_POSITIVE = ("always ",)


def strip_bullet(line: str) -> str:
    """`line` without its list marker (``-``, ``*``, ``+``, ``•``, ``1.``, ``1)``) and outer white space."""
    return _BULLET.sub("", line, count=1).strip()


def polarity(rule: str) -> tuple[bool, str]:
    """(positive?, core) of a rule: ``"Never use tabs."`` gives ``(False, "use tabs")``.

    >>> polarity("Don't guess")
    (False, 'guess')
    """
    key = normalise(strip_bullet(rule).replace("\u2019", "'"))
    for prefix in _NEGATIVE:
        if key.startswith(prefix):
            return False, key[len(prefix):].strip()
    for prefix in _POSITIVE:
        if key.startswith(prefix):
            return True, key[len(prefix):].strip()
    return True, key


def negates(a: str, b: str) -> bool:
    """True when rule `a` says the opposite of rule `b` (see `polarity`)."""
    positive_a, core_a = polarity(a)
    positive_b, core_b = polarity(b)
    return positive_a != positive_b and bool(core_a) and core_a == core_b


@dataclass(frozen=True)
class AppendRules(UnitStrategy):
    """Rules as bullets: free text gives one rule per line or bullet (blank lines and ``#`` headings skipped).

    Structured edits take a rule as `content` and an existing rule's text (with or without its bullet) as
    `target`. An add of a rule already there does nothing; an add that negates a rule replaces that rule.
    """

    scope: ClassVar[Scope] = Scope.RULE
    name: ClassVar[str] = "append_rules"

    def contradicts(self, a: Op, b: Op) -> bool:
        """True when both ops write rules and those rules negate each other."""
        if a.scope is not Scope.RULE or b.scope is not Scope.RULE or a.new is None or b.new is None:
            return False
        return negates(a.new, b.new)

    def _free_text(self, text: str) -> list[Edit]:
        rules = [strip_bullet(line) for line in text.split("\n") if not line.lstrip().startswith("#")]
        return [Edit(Action.ADD, rule) for rule in rules if rule]

    def _unit(self, content: str) -> str:
        rule = strip_bullet(content)
        if "\n" in rule or "\r" in rule:
            raise InvalidProposalError(f"{self.name}: a rule is one line, got {content[:80]!r}")
        if not rule:
            raise InvalidProposalError(f"{self.name}: {content[:80]!r} holds no rule text")
        unit = f"- {rule}"
        unit_key(self.scope, unit)
        return unit

    def _target_key(self, target: str) -> str:
        key = normalise(strip_bullet(target))
        if not key:
            raise InvalidProposalError(f"{self.name}: target {target[:80]!r} names no rule")
        return key

    def _add_existing(self, planner: Planner, index: int, new: str) -> None:
        """The rule is already there (same normalised text): nothing to do."""

    def _add_new(self, planner: Planner, new: str, at: int | None) -> None:
        for segment in planner.doc.segments:
            if segment.key is not None and negates(segment.key, new):
                planner.push(Op.replace(self.scope, segment.text, new))
                return
        planner.push(Op.add(self.scope, new, at=at))
