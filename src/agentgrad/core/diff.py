"""The gradient: a diff of typed ops against one version of one artifact, and its algebra.

`apply` runs the ops in order; `invert` gives the diff that undoes it; `compose` chains two diffs;
`rebase` (in `rebase.py`) moves a diff onto a newer head.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from agentgrad.core._checks import is_integer, items
from agentgrad.core.ids import validate_id
from agentgrad.core.library import member_text, with_member
from agentgrad.core.ops import Action, Op
from agentgrad.core.units import Document, Segment, normalise, parse, unit_key
from agentgrad.errors import ApplyConflictError, InvalidOpError


@dataclass(frozen=True)
class Diff:
    """A proposed edit of one artifact, made against `base_version`.

    Args:
        artifact_id: the artifact it edits.
        base_version: the version the ops were computed against.
        ops: the edits, applied in order.
        author: who proposed it (a worker, a model, a person).
        rationale: why, in the author's words.
        breaks_contract: True if the edit changes an interface others rely on; such a diff is never rebased.
        id: unique id; derived from the content when left empty.
    """

    artifact_id: str
    base_version: int
    ops: tuple[Op, ...]
    author: str = ""
    rationale: str = ""
    breaks_contract: bool = False
    id: str = field(default="")

    def __post_init__(self) -> None:
        validate_id(self.artifact_id)
        if not is_integer(self.base_version, low=0):
            raise InvalidOpError(f"base_version must be a non-negative int, got {self.base_version!r}")
        ops = items(self.ops, "Diff.ops (use Op.from_dict for dicts)", Op, error=InvalidOpError)
        object.__setattr__(self, "ops", ops)
        if not self.id:
            object.__setattr__(self, "id", "d" + _digest(self._content())[:15])
        else:
            validate_id(self.id, what="diff id")

    def _content(self) -> dict[str, Any]:
        return {"artifact": self.artifact_id, "base": self.base_version, "ops": [o.to_dict() for o in self.ops],
                "author": self.author, "rationale": self.rationale, "breaks": self.breaks_contract}

    def keys(self) -> frozenset[tuple[str, str]]:
        """The (scope, key) units this diff touches (the scope is ``member:scope`` for a library member's op)."""
        return frozenset((op.scope.value if op.member is None else f"{op.member}:{op.scope.value}", op.key)
                         for op in self.ops)

    def members(self) -> frozenset[str]:
        """The library members this diff edits (empty for a diff of a plain artifact)."""
        return frozenset(op.member for op in self.ops if op.member is not None)

    def changed_chars(self) -> int:
        """Total characters added or removed over all ops."""
        return sum(op.changed_chars() for op in self.ops)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; `Diff.from_dict` reverses it."""
        return {**self._content(), "id": self.id}

    @classmethod
    def from_dict(cls, data: object) -> Diff:
        """Build a diff from `to_dict` output, with a clear error for anything malformed."""
        if not isinstance(data, dict):
            raise InvalidOpError(f"a diff must be a dict, got {type(data).__name__}")
        try:
            ops = tuple(Op.from_dict(o) for o in data["ops"])
            return cls(data["artifact"], data["base"], ops, data.get("author", ""), data.get("rationale", ""),
                       bool(data.get("breaks", False)), data.get("id", ""))
        except (KeyError, TypeError) as exc:
            raise InvalidOpError(f"malformed diff dict: {exc!r}") from exc


def _digest(obj: object) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, ensure_ascii=True).encode()).hexdigest()


def fingerprint(diff: Diff) -> str:
    """A normalised identity of what a diff does (case, white space, order, base and author ignored).

    Two diffs with the same fingerprint make the same change; tabu uses it to skip re-evaluating rejects.
    """
    parts = sorted(
        (op.action.value, op.scope.value, op.key, normalise(op.new or ""), normalise(op.old or ""))
        + (() if op.member is None else (op.member,))
        for op in diff.ops
    )
    return _digest({"artifact": diff.artifact_id, "ops": parts})[:32]


def apply_op(doc: Document, op: Op) -> Document:
    """Apply one op to a parsed document of the op's scope; raises `ApplyConflictError` if it does not fit."""
    segments = list(doc.segments)
    index = doc.find(op.key)
    if op.action is Action.ADD:
        if index >= 0:
            raise ApplyConflictError(f"cannot add {op.scope.value} {op.key!r}: it is already there")
        at = doc.end() if op.at is None else min(op.at, len(segments))
        segments.insert(at, Segment(op.key, op.new or ""))
    else:
        if index < 0:
            raise ApplyConflictError(f"cannot {op.action.value} {op.scope.value} {op.key!r}: it is not there")
        if segments[index].text != op.old:
            raise ApplyConflictError(
                f"cannot {op.action.value} {op.scope.value} {op.key!r}: it holds other text than the op expects"
            )
        if op.action is Action.DELETE:
            del segments[index]
        else:
            new_key = unit_key(op.scope, op.new or "")
            if new_key != op.key and doc.find(new_key) >= 0:
                raise ApplyConflictError(f"cannot rename {op.key!r} to {new_key!r}: that unit exists")
            segments[index] = Segment(new_key, op.new or "")
    return replace(doc, segments=tuple(segments))


def apply_one(text: str, op: Op) -> str:
    """`text` after `op` (an op of a library member edits that member's text inside the packed library)."""
    if op.member is None:
        return apply_op(parse(op.scope, text), op).render()
    inner = member_text(text, op.member)
    return with_member(text, op.member, apply_op(parse(op.scope, inner), op.bare()).render())


def apply_ops(text: str, ops: Iterable[Op]) -> str:
    """Apply ops in order to `text` and return the new text."""
    for op in ops:
        text = apply_one(text, op)
    return text


def apply(diff: Diff, text: str) -> str:
    """Apply `diff` to `text` (the artifact at `diff.base_version`)."""
    return apply_ops(text, diff.ops)


def _inverse_op(doc: Document, op: Op) -> Op:
    if op.action is Action.ADD:
        return Op.delete(op.scope, op.new or "")
    if op.action is Action.REPLACE:
        return Op.replace(op.scope, op.new or "", op.old or "")
    return Op.add(op.scope, op.old or "", at=doc.find(op.key))


def invert(diff: Diff, base_text: str) -> Diff:
    """The diff that undoes `diff`: `apply(invert(d, t), apply(d, t)) == t`, made against version base + 1."""
    inverse: list[Op] = []
    text = base_text
    for op in diff.ops:
        doc = parse(op.scope, text if op.member is None else member_text(text, op.member))
        inverse.append(_inverse_op(doc, op.bare()).within(op.member))
        text = apply_one(text, op)
    return Diff(diff.artifact_id, diff.base_version + 1, tuple(reversed(inverse)), author=diff.author,
                rationale=f"revert {diff.id}")


def _merge_pair(first: Op, second: Op) -> tuple[Op, ...] | None:
    """Fuse two adjacent ops on the same unit, or None if they do not simplify."""
    if first.scope is not second.scope or first.member != second.member:
        return None
    if first.new is None or second.old is None or first.new != second.old:
        return None
    merged = _merge_bare(first.bare(), second.bare())
    return None if merged is None else tuple(op.within(first.member) for op in merged)


def _merge_bare(first: Op, second: Op) -> tuple[Op, ...] | None:
    if first.action is Action.ADD and second.action is Action.DELETE:
        return ()
    if first.action is Action.ADD and second.action is Action.REPLACE:
        return (Op.add(first.scope, second.new or "", at=first.at),)
    if first.action is Action.REPLACE and second.action is Action.REPLACE:
        if first.old == second.new:
            return ()
        return (Op.replace(first.scope, first.old or "", second.new or ""),)
    return None


def simplify(ops: Iterable[Op]) -> tuple[Op, ...]:
    """Cancel or fuse adjacent ops on the same unit; the result applies exactly like the input."""
    out: list[Op] = []
    for op in ops:
        merged = _merge_pair(out[-1], op) if out else None
        if merged is None:
            out.append(op)
        else:
            out.pop()
            out.extend(merged)
    return tuple(out)


def compose(first: Diff, second: Diff) -> Diff:
    """One diff equal to `first` then `second`: `apply(compose(a, b), t) == apply(b, apply(a, t))`."""
    if first.artifact_id != second.artifact_id:
        raise InvalidOpError(f"cannot compose diffs of {first.artifact_id!r} and {second.artifact_id!r}")
    if second.base_version != first.base_version + 1:
        raise InvalidOpError(
            f"cannot compose: the second diff is based on version {second.base_version}, "
            f"not on {first.base_version + 1} (the result of the first)"
        )
    return Diff(first.artifact_id, first.base_version, simplify(first.ops + second.ops),
                author=first.author if first.author == second.author else f"{first.author}+{second.author}",
                rationale="; ".join(r for r in (first.rationale, second.rationale) if r),
                breaks_contract=first.breaks_contract or second.breaks_contract)
