"""A library's members follow its packed artifact: every commit of the library commits the members it changed.

A run over a library evolves one packed artifact (`agentgrad.core.library`); its diffs' ops name the member
they edit. When such a diff commits, `mirror` commits, in the same transaction, one diff per member it touches
(id ``<library diff id>.<member>``, stage "library"), each with compare-and-swap on that member's head: the head
must hold the text the library saw, and must end with the text the library now holds. So each member keeps its own
history, git file, layer and stable head; `stable_targets` moves members' stable heads with the library's.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import replace

from agentgrad.core.artifact import Kind, Version
from agentgrad.core.decision import Decision
from agentgrad.core.diff import Diff, fingerprint
from agentgrad.core.evidence import Evidence
from agentgrad.core.library import unpack
from agentgrad.errors import DamagedStoreError, StaleHeadError
from agentgrad.store import tables

Commit = Callable[[Diff, Evidence, Decision, int], Version]
STAGE = "library"


def member_diff_id(diff_id: str, member: str) -> str:
    """The id of the member diff that library diff `diff_id` commits on `member`."""
    return f"{diff_id}.{member.replace('/', '.')}"


def is_library(conn: sqlite3.Connection, artifact_id: str) -> bool:
    """True when `artifact_id` is a packed library."""
    return tables.head(conn, artifact_id).kind == Kind.LIBRARY.value


def mirror(conn: sqlite3.Connection, diff: Diff, evidence: Evidence, decision: Decision, before: str, after: str,
           commit: Commit, text_of: Callable[[str], str]) -> list[Version]:
    """Commit, on each member `diff` touches, the member's part of it (`before`/`after`: the packed texts).

    `commit(diff, evidence, decision, expected)` commits on the member's dev head; `text_of(hash)` reads a text.
    `StaleHeadError` when a member's head no longer holds what the library saw (something else wrote it);
    `DamagedStoreError` when the member would end with another text than the library's.
    """
    old, new = unpack(before), unpack(after)
    versions = []
    for member in sorted(diff.members()):
        head = tables.head(conn, member)
        if text_of(head.hash) != old.get(member):
            raise StaleHeadError(f"library member {member!r}: its dev head v{head.number} is not the text the "
                                 f"library holds (it was written outside the library); diff {diff.id!r} refused")
        ops = tuple(op.bare() for op in diff.ops if op.member == member)
        part = Diff(member, head.number, ops, author=diff.author, rationale=diff.rationale,
                    id=member_diff_id(diff.id, member))
        verdict = replace(decision, diff_id=part.id, artifact_id=member, stage=STAGE,
                          reason=f"part of library change {diff.id}: {decision.reason}"[:2000],
                          fingerprint=fingerprint(part), parts=(diff.id,))
        version = commit(part, evidence, verdict, head.number)
        if version.text != new.get(member):
            raise DamagedStoreError(f"library member {member!r} would hold other text than library diff "
                                    f"{diff.id!r} gives it; nothing was committed")
        versions.append(version)
    return versions


def stable_targets(conn: sqlite3.Connection, targets: Mapping[str, int]) -> dict[str, int]:
    """`targets` (artifact id -> dev version for its stable head) with, for each library in it, its members at
    the versions that library version holds (a member's target set explicitly is kept)."""
    out = dict(targets)
    for artifact_id, number in targets.items():
        if not is_library(conn, artifact_id):
            continue
        library_diffs = {row[0] for row in conn.execute(
            "SELECT diff_id FROM versions WHERE artifact_id = ? AND number <= ? AND diff_id IS NOT NULL",
            (artifact_id, number))}
        for member in unpack(tables.version(conn, artifact_id, number).text):
            rows = conn.execute("SELECT number, diff_id FROM versions WHERE artifact_id = ? ORDER BY number",
                                (member,)).fetchall()
            wanted = {member_diff_id(d, member) for d in library_diffs}
            at = max(n for n, d in rows if d is None or d in wanted)
            out.setdefault(member, at)
    return out
