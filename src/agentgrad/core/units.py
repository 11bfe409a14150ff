"""How a text splits into addressable units: rules, keyed entries, markdown sections, or the whole text.

A text is parsed into a `Document`: an ordered list of `Segment`s, each a block of whole lines. A segment with a
key is a unit a diff op can address; a segment without one (`key=None`) is filler that ops leave alone. Rendering
a parsed document gives back the exact text, byte for byte, so apply and invert are exact.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from agentgrad.core._checks import text
from agentgrad.errors import InvalidOpError


class Scope(str, Enum):
    """The kind of unit an op addresses.

    RULE: a bullet line (``- text`` or ``* text``), keyed by its normalised text.
    KEY: a ``key: value`` line (optionally bulleted), keyed by its normalised key.
    SECTION: a markdown heading and the lines up to the next heading, keyed by the heading's title.
    TEXT: the whole text, one unit with key ``""``.
    """

    RULE = "rule"
    KEY = "key"
    SECTION = "section"
    TEXT = "text"


_RULE = re.compile(r"^\s*[-*]\s+(?P<body>\S.*)$")
_KEYED = re.compile(r"^\s*(?:[-*]\s+)?(?P<key>[^:\s][^:]{0,79}?)\s*:\s*(?P<value>.*)$")
_HEADING = re.compile(r"^(?P<hashes>#{1,6})\s+(?P<title>\S.*?)\s*#*\s*$")
_SPACES = re.compile(r"\s+")


def normalise(text: str) -> str:
    """Case-fold, collapse white space and drop trailing punctuation: the identity of a rule or key."""
    return _SPACES.sub(" ", text).strip().rstrip(".;,!").strip().casefold()


@dataclass(frozen=True)
class Segment:
    """A block of whole lines (joined with ``\\n``, no final newline); `key` is None for filler."""

    key: str | None
    text: str


@dataclass(frozen=True)
class Document:
    """A parsed text: its segments in order. A final newline shows up as a last, empty filler segment."""

    scope: Scope
    segments: tuple[Segment, ...]

    def render(self) -> str:
        """The exact text this document came from (or the edited text, after ops)."""
        joiner = "" if self.scope is Scope.TEXT else "\n"
        return joiner.join(s.text for s in self.segments)

    def end(self) -> int:
        """Where an appended unit goes: before a final empty line, so a text keeps its final newline."""
        last = self.segments[-1] if self.segments else None
        if last is not None and last.key is None and last.text == "":
            return len(self.segments) - 1
        return len(self.segments)

    def find(self, key: str) -> int:
        """Index of the first segment with `key`, or -1."""
        for index, segment in enumerate(self.segments):
            if segment.key == key:
                return index
        return -1

    def keys(self) -> list[str]:
        """The unit keys in order (filler left out)."""
        return [s.key for s in self.segments if s.key is not None]


def _line_key(scope: Scope, line: str) -> str | None:
    if scope is Scope.RULE:
        match = _RULE.match(line)
        return normalise(match.group("body")) if match else None
    if scope is Scope.KEY:
        match = _KEYED.match(line)
        return normalise(match.group("key")) if match else None
    match = _HEADING.match(line)
    return normalise(match.group("title")) if match else None


def parse(scope: Scope, text: str) -> Document:
    """Split `text` into the units of `scope`; `parse(s, t).render() == t` for every text."""
    scope = Scope(scope)
    if scope is Scope.TEXT:
        return Document(scope, (Segment("", text),) if text else ())
    lines = text.split("\n")
    if scope is not Scope.SECTION:
        return Document(scope, tuple(Segment(_line_key(scope, line), line) for line in lines))
    blocks: list[tuple[str | None, list[str]]] = []
    for line in lines:
        key = _line_key(scope, line)
        if key is not None or not blocks:
            blocks.append((key, [line]))
        else:
            blocks[-1][1].append(line)
    return Document(scope, tuple(Segment(k, "\n".join(b)) for k, b in blocks))


def unit_key(scope: Scope, content: str) -> str:
    """The key of `content` as one unit of `scope`; raises `InvalidOpError` if it is not exactly one unit.

    A rule or keyed entry is one line; a section is a heading line followed by lines that are not headings.
    """
    scope = Scope(scope)
    text(content, f"{scope.value} content", empty=True, error=InvalidOpError)
    if scope is Scope.TEXT:
        return ""
    lines = content.split("\n")
    key = _line_key(scope, lines[0])
    if scope is not Scope.SECTION and len(lines) > 1:
        key = None
    if scope is Scope.SECTION and any(_line_key(scope, line) is not None for line in lines[1:]):
        key = None
    if key is None:
        raise InvalidOpError(f"{content[:80]!r} is not exactly one {scope.value} unit")
    return key
