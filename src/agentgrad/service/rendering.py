"""Diffs as text people read: a unified diff between two versions of an artifact."""

from __future__ import annotations

import difflib


def unified(old: str, new: str, old_label: str, new_label: str) -> str:
    """The unified diff from `old` to `new` (every line ends with a newline; empty when they are the same)."""
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True), old_label, new_label)
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)
