"""The `Strategy` protocol: how a proposal becomes typed diff ops of one scope, and the shared machinery.

A proposal is free text (a strategy reads it its own way) or structured edits: a list of
``{"action": "add" | "replace" | "delete", "content": ..., "target": ...}`` dicts (one such dict alone is accepted
too; a dict with an "action" key is always read as one edit). `content` is the new unit as the strategy's free
text would write it; `target` names an existing unit (its key or its full text). An add of a unit that is
already there becomes a replace or nothing, depending on the strategy; an add with a target is inserted right
after that unit.

`UnitStrategy` holds what the four built-in strategies share: validation of the proposal, dispatch to the
strategy's readers, and a planner that computes each op against the text left by the ops before it, so the ops
apply in order with `agentgrad.core.diff.apply_ops`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypeAlias

from agentgrad.core import _checks
from agentgrad.core.diff import Diff, apply_op, simplify
from agentgrad.core.ops import Action, Op
from agentgrad.core.units import Document, Scope, parse, unit_key
from agentgrad.errors import ApplyConflictError, InvalidOpError, InvalidProposalError

RawProposal: TypeAlias = str | Mapping[str, Any] | Sequence[Mapping[str, Any]]
Rendered: TypeAlias = str | Mapping[str, str]  # what `run` gets: a text, or a library's texts by artifact id
DEFAULT_MAX_CHARS = 20_000
EDIT_FIELDS = frozenset({"action", "content", "target"})


class Strategy(Protocol):
    """Turns proposals into ops of one scope, shows the solver the text, and spots contradictory ops."""

    @property
    def scope(self) -> Scope: ...

    @property
    def name(self) -> str: ...

    def ops(self, proposal: RawProposal, text: str) -> tuple[Op, ...]:
        """The ops that carry `proposal` out on `text` (empty if it changes nothing)."""
        ...

    def render(self, text: str) -> Rendered:
        """What the solver sees of an artifact holding `text` (a library strategy: each member's text by id)."""
        ...

    def contradicts(self, a: Op, b: Op) -> bool:
        """True when `a` and `b` say opposite things (so at most one of them should be kept)."""
        ...


@dataclass(frozen=True)
class Edit:
    """One structured edit: add `content`, replace `target` (or the unit `content` names) with it, or delete."""

    action: Action
    content: str | None = None
    target: str | None = None


def make_diff(strategy: Strategy, artifact_id: str, base_version: int, text: str, proposal: RawProposal, *,
              author: str = "", rationale: str = "") -> Diff:
    """A `Diff` of `strategy.ops(proposal, text)` against `base_version` (it may have no ops: nothing to do)."""
    return Diff(artifact_id, base_version, strategy.ops(proposal, text), author=author, rationale=rationale)


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # control characters but tab, newline, return


def check_text(value: str, what: str) -> str:
    """Return `value` if it encodes as UTF-8 and holds no control character (a NUL byte, an escape, ...; tab,
    newline and carriage return are text), else raise `InvalidProposalError` saying which and where."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidProposalError(f"{what} is not valid Unicode (lone surrogate at index {exc.start})") from exc
    control = _CONTROL.search(value)
    if control is not None:
        raise InvalidProposalError(f"{what} holds a control character (U+{ord(control.group()):04X} at index "
                                   f"{control.start()}); it would be committed into the artifact and its exports")
    return value


def _strings(value: object, where: str) -> Iterator[tuple[str, str]]:
    """Every string inside a structured proposal, with where it sits (for error messages)."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidProposalError(f"{where}: keys must be strings, got {type(key).__name__}")
            yield f"{where} key", key
            yield from _strings(item, f"{where}[{key[:40]!r}]")
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from _strings(item, f"{where}[{index}]")


def check_proposal(proposal: object, max_chars: int, name: str) -> RawProposal:
    """Refuse proposals that are not text, a dict or a list of dicts, are empty, too large or not valid Unicode."""
    if isinstance(proposal, str):
        if not proposal.strip():
            raise InvalidProposalError(f"{name}: the proposal is empty")
        size = len(check_text(proposal, f"{name}: the proposal"))
    elif isinstance(proposal, (Mapping, list, tuple)):
        if not proposal:
            raise InvalidProposalError(f"{name}: the proposal is an empty {type(proposal).__name__}")
        size = sum(len(check_text(s, f"{name}: {where}")) for where, s in _strings(proposal, "proposal"))
    else:
        raise InvalidProposalError(
            f"{name}: a proposal must be text, a dict or a list of dicts, got {type(proposal).__name__}")
    if size > max_chars:
        raise InvalidProposalError(f"{name}: the proposal has {size} characters; the limit is {max_chars}")
    return proposal


def _edit(item: object, where: str) -> Edit:
    if not isinstance(item, Mapping):
        raise InvalidProposalError(f"{where} must be a dict with an 'action', got {type(item).__name__}")
    unknown = sorted(set(item) - EDIT_FIELDS)
    if unknown or "action" not in item:
        raise InvalidProposalError(f"{where} needs an 'action' and only {sorted(EDIT_FIELDS)}; got {sorted(item)}")
    try:
        action = Action(item["action"])
    except ValueError:
        raise InvalidProposalError(
            f"{where}: unknown action {item['action']!r}; expected add, replace or delete") from None
    content, target = item.get("content"), item.get("target")
    for field_name, value in (("content", content), ("target", target)):
        if value is not None and not isinstance(value, str):
            raise InvalidProposalError(f"{where}: {field_name} must be a string, got {type(value).__name__}")
    if action is not Action.DELETE and (content is None or not content.strip()):
        raise InvalidProposalError(f"{where}: a {action.value} needs non-empty 'content'")
    return Edit(action, content, target)


def edits_from(items: Sequence[object], name: str = "proposal") -> list[Edit]:
    """Parse a list of structured edit dicts, naming the strategy and the edit (#1, #2, ...) in any error."""
    return [_edit(item, f"{name}: edit #{index + 1}") for index, item in enumerate(items)]


@contextmanager
def proposal_errors(name: str) -> Iterator[None]:
    """Re-raise op and apply errors met while planning as `InvalidProposalError`s prefixed with `name`."""
    try:
        yield
    except (InvalidOpError, ApplyConflictError) as exc:
        raise InvalidProposalError(f"{name}: {exc}") from exc


class Planner:
    """Collects ops while tracking the document they produce: each op is computed against the text so far.

    State: the current parsed document and the ops pushed so far (a short-lived working object).
    """

    def __init__(self, scope: Scope, text: str) -> None:
        self.doc: Document = parse(scope, text)
        self.pushed: list[Op] = []

    def find(self, key: str) -> int:
        """Index of the unit with `key` in the current document, or -1."""
        return self.doc.find(key)

    def text_at(self, index: int) -> str:
        """The text of segment `index` of the current document."""
        return self.doc.segments[index].text

    def push(self, op: Op) -> None:
        """Apply `op` to the working document and keep it."""
        self.doc = apply_op(self.doc, op)
        self.pushed.append(op)

    def result(self) -> tuple[Op, ...]:
        """The ops so far, with adjacent edits of one unit fused (same effect, fewer ops)."""
        return simplify(self.pushed)


@dataclass(frozen=True)
class UnitStrategy:
    """Shared behaviour of unit-based strategies; subclasses set `scope`, `name` and the reading hooks.

    Args:
        max_chars: proposals with more characters than this are refused.
    """

    scope: ClassVar[Scope]
    name: ClassVar[str]
    max_chars: int = DEFAULT_MAX_CHARS

    def __post_init__(self) -> None:
        _checks.integer(self.max_chars, f"{self.name}: max_chars", low=1)

    def ops(self, proposal: RawProposal, text: str) -> tuple[Op, ...]:
        """The ops that carry `proposal` out on `text`; raises `InvalidProposalError` for a bad proposal."""
        checked = check_proposal(proposal, self.max_chars, self.name)
        _checks.text(text, f"{self.name}: the artifact text", empty=True, error=InvalidProposalError)
        with proposal_errors(self.name):
            planner = Planner(self.scope, text)
            for edit in self._edits(checked):
                self._plan(planner, edit)
            return planner.result()

    def render(self, text: str) -> str:
        """The solver sees the text as it is."""
        return text

    def contradicts(self, a: Op, b: Op) -> bool:
        """Two ops of this scope on the same unit that leave it saying different things."""
        if a.scope is not self.scope or b.scope is not self.scope or a.key != b.key:
            return False
        return self._meaning(a.new) != self._meaning(b.new)

    # -- hooks -------------------------------------------------------------------------------------------------

    def _free_text(self, text: str) -> list[Edit]:
        """The edits a free-text proposal asks for."""
        raise NotImplementedError

    def _mapping(self, mapping: Mapping[str, Any]) -> list[Edit]:
        """The edits a strategy-specific dict asks for; by default there is no such shape."""
        raise InvalidProposalError(
            f"{self.name}: a dict proposal must be one edit {sorted(EDIT_FIELDS)}; got keys {sorted(mapping)[:5]}")

    def _unit(self, content: str) -> str:
        """`content` written as exactly one unit of this scope."""
        unit_key(self.scope, content)
        return content

    def _target_key(self, target: str) -> str:
        """The unit key a `target` names (its key or its whole text)."""
        return unit_key(self.scope, target)

    def _merge(self, old: str, new: str) -> str | None:
        """The text that replaces unit `old` when `new` lands on it; None when `old` already says it."""
        return None if old == new else new

    def _meaning(self, new: str | None) -> object:
        """What a unit's text says, for `contradicts` (None for a deleted unit)."""
        return new

    def _add_new(self, planner: Planner, new: str, at: int | None) -> None:
        """Add a unit whose key is not in the document yet."""
        planner.push(Op.add(self.scope, new, at=at))

    def _add_existing(self, planner: Planner, index: int, new: str) -> None:
        """Add a unit whose key is already there: replace it when it differs."""
        self._replace_at(planner, index, new)

    # -- planning ----------------------------------------------------------------------------------------------

    def _edits(self, proposal: RawProposal) -> list[Edit]:
        if isinstance(proposal, str):
            edits = self._free_text(proposal)
        elif isinstance(proposal, Mapping):
            edits = edits_from([proposal], self.name) if "action" in proposal else self._mapping(proposal)
        else:
            edits = edits_from(proposal, self.name)
        if not edits:
            raise InvalidProposalError(f"{self.name}: the proposal holds no {self.scope.value} units")
        return edits

    def _locate(self, planner: Planner, reference: str | None, action: Action) -> int:
        if reference is None:
            if self.scope is not Scope.TEXT:
                raise InvalidProposalError(f"{self.name}: a {action.value} needs a 'target' or 'content'")
            key = ""
        else:
            key = self._target_key(reference)
        index = planner.find(key)
        if index < 0:
            raise InvalidProposalError(
                f"{self.name}: cannot {action.value} {self.scope.value} {key!r}: it is not in the artifact")
        return index

    def _replace_at(self, planner: Planner, index: int, new: str) -> None:
        old = planner.text_at(index)
        merged = self._merge(old, new)
        if merged is not None:
            planner.push(Op.replace(self.scope, old, merged))

    def _plan(self, planner: Planner, edit: Edit) -> None:
        if edit.action is Action.DELETE:
            index = self._locate(planner, edit.target if edit.target is not None else edit.content, edit.action)
            planner.push(Op.delete(self.scope, planner.text_at(index)))
            return
        new = self._unit(edit.content or "")
        if edit.action is Action.REPLACE:
            index = self._locate(planner, edit.target if edit.target is not None else new, edit.action)
            self._replace_at(planner, index, new)
            return
        index = planner.find(unit_key(self.scope, new))
        if index >= 0:
            self._add_existing(planner, index, new)
            return
        self._add_new(planner, new, self._anchor(planner, edit.target))

    def _anchor(self, planner: Planner, target: str | None) -> int | None:
        """Where an add goes: after its target; at the end when it names none, or one the artifact does not hold
        (the unit is what the proposer meant to add, the anchor only its place)."""
        index = -1 if target is None else planner.find(self._target_key(target))
        return None if index < 0 else index + 1
