"""`KeyedRules`: the artifact holds ``key: value`` lines; a proposal sets keys.

A new key is appended as ``- key: value``; a key already there with another value is replaced in place (keeping
the line's indent, bullet and key spelling); a key already holding that value is left alone. A replace that
targets one key with content of another renames the entry. Values compare with white space collapsed; keys
compare normalised (case, spaces, trailing punctuation).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from agentgrad.core.ops import Action
from agentgrad.core.units import Scope, parse, unit_key
from agentgrad.errors import InvalidProposalError
from agentgrad.strategies.base import Edit, UnitStrategy

_ENTRY = re.compile(r"^(?P<prefix>\s*(?:[-*]\s+)?)(?P<key>[^:]*?)\s*:\s*(?P<value>.*?)\s*$")


@dataclass(frozen=True)
class Entry:
    """One parsed ``key: value`` line: its indent and bullet, the key as written, and the value."""

    prefix: str
    key: str
    value: str


def split_entry(line: str) -> Entry:
    """Parse one ``key: value`` line (optionally bulleted); raises `InvalidProposalError` if it is not one."""
    match = _ENTRY.match(line)
    if match is None or "\n" in line:
        raise InvalidProposalError(f"{line[:80]!r} is not a 'key: value' line")
    unit_key(Scope.KEY, line)
    return Entry(match.group("prefix"), match.group("key"), match.group("value"))


def same_value(a: str, b: str) -> bool:
    """True when two values are equal once white space is collapsed."""
    return a.split() == b.split()


def entries(text: str) -> dict[str, str]:
    """The normalised key → value map of the ``key: value`` lines of `text` (the first line wins for a key)."""
    found: dict[str, str] = {}
    for segment in parse(Scope.KEY, text).segments:
        if segment.key is not None and segment.key not in found:
            found[segment.key] = split_entry(segment.text).value
    return found


@dataclass(frozen=True)
class KeyedRules(UnitStrategy):
    """Keyed entries: free text gives one ``key: value`` per line (blank lines and ``#`` headings skipped).

    A dict proposal ``{key: value}`` sets each key; a value of None deletes the key. Structured edits take
    ``"key: value"`` as `content` and a key (or a whole line) as `target`; ``{"action": "delete", "target":
    "key"}`` deletes a key.
    """

    scope: ClassVar[Scope] = Scope.KEY
    name: ClassVar[str] = "keyed_rules"

    def _free_text(self, text: str) -> list[Edit]:
        lines = [line for line in text.split("\n") if line.strip() and not line.lstrip().startswith("#")]
        return [Edit(Action.ADD, line.strip()) for line in lines]

    def _mapping(self, mapping: Mapping[str, Any]) -> list[Edit]:
        edits = []
        for key, value in mapping.items():
            if not key.strip() or ":" in key or "\n" in key:
                raise InvalidProposalError(f"{self.name}: {key[:80]!r} is not a key (one line, no ':')")
            if value is None:
                edits.append(Edit(Action.DELETE, target=key))
            elif isinstance(value, str):
                edits.append(Edit(Action.ADD, f"{key.strip()}: {value}"))
            else:
                raise InvalidProposalError(
                    f"{self.name}: the value of {key[:40]!r} must be a string or None, got {type(value).__name__}")
        return edits

    def _unit(self, content: str) -> str:
        entry = split_entry(content.strip())
        if not entry.value:
            raise InvalidProposalError(f"{self.name}: {content[:80]!r} has an empty value")
        return f"- {entry.key}: {entry.value}"

    def _target_key(self, target: str) -> str:
        line = target.strip()
        return unit_key(self.scope, line if ":" in line else f"{line}:")

    def _merge(self, old: str, new: str) -> str | None:
        before, after = split_entry(old), split_entry(new)
        renamed = unit_key(self.scope, old) != unit_key(self.scope, new)
        if not renamed and same_value(before.value, after.value):
            return None
        return f"{before.prefix}{after.key if renamed else before.key}: {after.value}"

    def _meaning(self, new: str | None) -> object:
        return None if new is None else tuple(split_entry(new).value.split())
