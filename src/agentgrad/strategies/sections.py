"""`Sections`: the artifact is markdown; a proposal writes whole sections (a ``#`` heading and its body).

A section whose title is new is appended; a section whose title is there with another body replaces that body
(the artifact's heading line and the blank lines after the section are kept; a replace with another title
renames the section); the same body is left alone.
Bodies compare with trailing spaces and leading or trailing blank lines ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from agentgrad.core.ops import Action, Op
from agentgrad.core.units import Scope, normalise, parse, unit_key
from agentgrad.errors import InvalidProposalError
from agentgrad.strategies.base import Edit, Planner, UnitStrategy

NEW_HEADING = "##"


def _drop_blank_ends(lines: list[str]) -> list[str]:
    """`lines` without the blank lines at either end."""
    start, stop = 0, len(lines)
    while start < stop and not lines[start].strip():
        start += 1
    while stop > start and not lines[stop - 1].strip():
        stop -= 1
    return lines[start:stop]


def body_lines(section: str) -> list[str]:
    """The body of a section (the lines after its heading) without blank lines at either end."""
    return _drop_blank_ends(section.split("\n")[1:])


def same_body(a: str, b: str) -> bool:
    """True when two sections have the same body, trailing spaces ignored."""
    return [x.rstrip() for x in body_lines(a)] == [x.rstrip() for x in body_lines(b)]


def _trailing_blanks(section: str) -> int:
    lines = section.split("\n")
    count = 0
    while len(lines) - count > 1 and not lines[-1 - count].strip():
        count += 1
    return count


@dataclass(frozen=True)
class Sections(UnitStrategy):
    """Markdown sections: free text is markdown with ``#`` headings; every section in it is written.

    A dict proposal ``{title: body}`` writes each section (a new one gets a ``##`` heading); a body of None
    deletes the section. Structured edits take a whole section (heading line first) as `content` and a title
    (or a heading line) as `target`.
    """

    scope: ClassVar[Scope] = Scope.SECTION
    name: ClassVar[str] = "sections"

    def _free_text(self, text: str) -> list[Edit]:
        segments = parse(self.scope, text).segments
        if segments and segments[0].key is None and segments[0].text.strip():
            raise InvalidProposalError(
                f"{self.name}: the proposal has text before its first heading: {segments[0].text.strip()[:80]!r}")
        return [Edit(Action.ADD, s.text) for s in segments if s.key is not None]

    def _mapping(self, mapping: Mapping[str, Any]) -> list[Edit]:
        edits = []
        for title, body in mapping.items():
            if not title.strip() or "\n" in title:
                raise InvalidProposalError(f"{self.name}: {title[:80]!r} is not a section title (one line)")
            if body is None:
                edits.append(Edit(Action.DELETE, target=title))
            elif isinstance(body, str):
                edits.append(Edit(Action.ADD, f"{NEW_HEADING} {title.strip()}\n{body}"))
            else:
                raise InvalidProposalError(
                    f"{self.name}: the body of {title[:40]!r} must be a string or None, got {type(body).__name__}")
        return edits

    def _unit(self, content: str) -> str:
        unit = "\n".join(_drop_blank_ends(content.split("\n")))
        unit_key(self.scope, unit)
        return unit

    def _target_key(self, target: str) -> str:
        line = target.strip().split("\n")[0]
        key = unit_key(self.scope, line) if line.startswith("#") else normalise(line)
        if not key:
            raise InvalidProposalError(f"{self.name}: target {target[:80]!r} names no section")
        return key

    def _add_new(self, planner: Planner, new: str, at: int | None) -> None:
        """Append or insert a section; at the end of a text that ends with a newline, keep that newline."""
        if at is None and planner.doc.render().endswith("\n"):
            new += "\n"
        planner.push(Op.add(self.scope, new, at=at))

    def _merge(self, old: str, new: str) -> str | None:
        renamed = unit_key(self.scope, old) != unit_key(self.scope, new)
        if not renamed and same_body(old, new):
            return None
        heading = (new if renamed else old).split("\n")[0]
        return "\n".join([heading, *body_lines(new), *[""] * _trailing_blanks(old)])

    def _meaning(self, new: str | None) -> object:
        return None if new is None else tuple(x.rstrip() for x in body_lines(new))
