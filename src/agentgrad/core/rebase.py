"""Rebase: move a diff made against an older version onto the current head.

Each op is re-anchored on the head's text. A rule or keyed op rebases when its unit still holds the text it
expected (or already holds the result, in which case the op is dropped as done). A whole-text or section replace
whose unit changed meanwhile is merged three ways (base = the op's old text, ours = its new text, theirs = head);
overlapping edits are a conflict. The result is either a new `Diff` against the head or a `Conflict`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import merge3

from agentgrad.core.diff import Diff, apply_one
from agentgrad.core.library import member_text
from agentgrad.core.ops import Action, Op
from agentgrad.core.units import Scope, parse
from agentgrad.errors import ApplyConflictError, InvalidOpError


@dataclass(frozen=True)
class Conflict:
    """Why a diff could not be rebased: the op that failed and the reason."""

    diff_id: str
    op_index: int
    reason: str


def merge_text(base: str, ours: str, theirs: str) -> str | None:
    """Three-way merge of line-based texts; None when both sides changed the same or adjacent lines."""
    if ours == theirs or theirs == base:
        return ours
    if ours == base:
        return theirs
    a, b = ours.splitlines(keepends=True), theirs.splitlines(keepends=True)
    merger = merge3.Merge3(base.splitlines(keepends=True), a, b)
    out: list[str] = []
    for region in merger.merge_regions():
        kind = region[0]
        if kind == "conflict":
            return None
        if kind == "unchanged":
            out.extend(merger.base[region[1]:region[2]])
        elif kind in ("a", "same"):
            out.extend(a[region[1]:region[2]])
        else:
            out.extend(b[region[1]:region[2]])
    return "".join(out)


def _rebase_op(op: Op, head_text: str) -> Op | str | None:
    """The op re-anchored on `head_text`; None if the head already has its effect; a str reason on conflict."""
    if op.member is None:
        return _rebase_bare(op, head_text)
    moved = _rebase_bare(op.bare(), member_text(head_text, op.member))
    if isinstance(moved, Op):
        return moved.within(op.member)
    return moved if moved is None else f"{op.member}: {moved}"


def _rebase_bare(op: Op, head_text: str) -> Op | str | None:
    doc = parse(op.scope, head_text)
    index = doc.find(op.key)
    current = doc.segments[index].text if index >= 0 else None
    if op.action is Action.ADD:
        if current is None:
            return replace(op, at=None) if op.at is not None else op
        return None if current == op.new else f"{op.scope.value} {op.key!r} was added meanwhile with other text"
    if current is None:
        return None if op.action is Action.DELETE else f"{op.scope.value} {op.key!r} was deleted meanwhile"
    if current == op.old:
        return op
    if op.action is Action.DELETE:
        return f"{op.scope.value} {op.key!r} was edited meanwhile; refusing to delete the new text"
    if current == op.new:
        return None
    if op.scope in (Scope.TEXT, Scope.SECTION):
        merged = merge_text(op.old or "", op.new or "", current)
        if merged is not None:
            try:
                return Op.replace(op.scope, current, merged)
            except InvalidOpError as exc:
                return f"{op.scope.value} {op.key!r}: the merged text is not one unit ({exc})"
    return f"{op.scope.value} {op.key!r} was edited meanwhile and the edits overlap"


def rebase(diff: Diff, head_text: str, head_version: int) -> Diff | Conflict:
    """Re-anchor `diff` on `head_text` (the artifact at `head_version`); a `Conflict` if it cannot be done.

    A diff whose every op is already in the head rebases to a diff with no ops (the caller treats it as a
    duplicate). The rebased diff keeps the id, author and rationale of the original.
    """
    if head_version == diff.base_version:
        return diff
    ops: list[Op] = []
    text = head_text
    for index, op in enumerate(diff.ops):
        moved = _rebase_op(op, text)
        if isinstance(moved, str):
            return Conflict(diff.id, index, moved)
        if moved is None:
            continue
        try:
            text = apply_one(text, moved)
        except (ApplyConflictError, InvalidOpError) as exc:
            return Conflict(diff.id, index, str(exc))
        ops.append(moved)
    return replace(diff, base_version=head_version, ops=tuple(ops))
