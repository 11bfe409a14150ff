"""Typed diff ops: add, replace or delete one unit (rule, keyed entry, section or whole text)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from agentgrad.core.ids import validate_id
from agentgrad.core.units import Scope, unit_key
from agentgrad.errors import InvalidOpError


class Action(str, Enum):
    """What an op does to its unit."""

    ADD = "add"
    REPLACE = "replace"
    DELETE = "delete"


def _enum(kind: type[Enum], value: object, what: str) -> Any:
    try:
        return kind(value)
    except ValueError:
        choices = ", ".join(str(m.value) for m in kind)
        raise InvalidOpError(f"unknown {what} {value!r}; expected one of: {choices}") from None


@dataclass(frozen=True)
class Op:
    """One edit of one unit.

    Args:
        action: add, replace or delete.
        scope: how the text is split into units (rule, key, section, text).
        old: the unit's content before the edit (replace, delete); None for add.
        new: the unit's content after the edit (add, replace); None for delete.
        at: for add, the segment index to insert at (None appends at the end).
        member: in a library run, the id of the member artifact the op edits (the diff's own artifact is the
            packed library, `agentgrad.core.library`); None for an op on a plain artifact.
    The unit `key` is derived from `old` (or from `new` for add).
    """

    action: Action
    scope: Scope
    old: str | None = None
    new: str | None = None
    at: int | None = None
    member: str | None = None
    key: str = field(init=False, default="")

    def __post_init__(self) -> None:
        action = _enum(Action, self.action, "op action")
        scope = _enum(Scope, self.scope, "op scope")
        object.__setattr__(self, "action", action)
        object.__setattr__(self, "scope", scope)
        needs_old = action is not Action.ADD
        needs_new = action is not Action.DELETE
        if needs_old != (self.old is not None) or needs_new != (self.new is not None):
            raise InvalidOpError(
                f"{action.value} op needs {'old' if needs_old else 'no old'} and {'new' if needs_new else 'no new'}"
                f" content (got old={self.old is not None}, new={self.new is not None})"
            )
        if self.at is not None and (action is not Action.ADD or not isinstance(self.at, int) or self.at < 0):
            raise InvalidOpError(f"'at' must be a non-negative int on add ops only, got {self.at!r}")
        if self.member is not None:
            validate_id(self.member, what="op member")
        key = unit_key(scope, self.old if self.old is not None else self.new)  # type: ignore[arg-type]
        if self.new is not None:
            unit_key(scope, self.new)
        object.__setattr__(self, "key", key)

    @classmethod
    def add(cls, scope: Scope | str, new: str, *, at: int | None = None) -> Op:
        """An op that adds unit `new` (appended unless `at` is given)."""
        return cls(Action.ADD, Scope(scope), None, new, at)

    @classmethod
    def replace(cls, scope: Scope | str, old: str, new: str) -> Op:
        """An op that replaces unit `old` with `new` in place."""
        return cls(Action.REPLACE, Scope(scope), old, new)

    @classmethod
    def delete(cls, scope: Scope | str, old: str) -> Op:
        """An op that deletes unit `old`."""
        return cls(Action.DELETE, Scope(scope), old, None)

    def changed_chars(self) -> int:
        """Characters this op adds or removes, counted over changed lines (the trust-region size)."""
        old_lines = (self.old or "").split("\n") if self.old else []
        new_lines = (self.new or "").split("\n") if self.new else []
        matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
        total = 0
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag != "equal":
                total += sum(len(x) for x in old_lines[i1:i2]) + sum(len(x) for x in new_lines[j1:j2])
        return total

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; `Op.from_dict` reverses it."""
        data: dict[str, Any] = {"action": self.action.value, "scope": self.scope.value, "old": self.old,
                                "new": self.new, "at": self.at}
        if self.member is not None:
            data["member"] = self.member
        return data

    def bare(self) -> Op:
        """This op without its library member (the op on the member's own text)."""
        return self if self.member is None else replace(self, member=None)

    def within(self, member: str | None) -> Op:
        """This op addressed to library member `member`."""
        return self if self.member == member else replace(self, member=member)

    @classmethod
    def from_dict(cls, data: object) -> Op:
        """Build an op from `to_dict` output, with a clear error for anything malformed."""
        if not isinstance(data, dict):
            raise InvalidOpError(f"an op must be a dict, got {type(data).__name__}")
        unknown = set(data) - {"action", "scope", "old", "new", "at", "key", "member"}
        if unknown:
            raise InvalidOpError(f"unknown op fields: {sorted(unknown)}")
        if "action" not in data or "scope" not in data:
            raise InvalidOpError("an op needs 'action' and 'scope'")
        return cls(data["action"], data["scope"], data.get("old"), data.get("new"), data.get("at"), data.get("member"))
