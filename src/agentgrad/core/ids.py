"""Validation of the ids that name artifacts and diffs (they become file names in the git mirror)."""

from __future__ import annotations

import re

from agentgrad.core._checks import text
from agentgrad.errors import InvalidIdError

MAX_ID_LENGTH = 200
_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def validate_id(value: object, *, what: str = "artifact id") -> str:
    """Return `value` if it is a safe id, else raise `InvalidIdError` saying why.

    A safe id is 1-200 characters of slash-separated segments; each segment starts with a letter or digit and
    holds only letters, digits, `.`, `_` and `-`. `..`, absolute paths, NUL bytes and backslashes are refused,
    so an id can be used as a relative path inside a run directory.

    >>> validate_id("skills/math.md")
    'skills/math.md'
    """
    ident = text(value, what, empty=True, error=InvalidIdError)
    if not ident:
        raise InvalidIdError(f"{what} must not be empty")
    if len(ident) > MAX_ID_LENGTH:
        raise InvalidIdError(f"{what} is {len(ident)} characters long; the limit is {MAX_ID_LENGTH}")
    if "\x00" in ident:
        raise InvalidIdError(f"{what} {ident!r} contains a NUL byte")
    for segment in ident.split("/"):
        if segment in ("", ".", "..") or not _SEGMENT.match(segment) or segment.endswith(".lock"):
            raise InvalidIdError(
                f"{what} {ident!r} is not a safe relative path: segment {segment!r} must start with a letter "
                "or digit and use only letters, digits, '.', '_' and '-'"
            )
    return ident
