"""Which members each recent version of a packed library changed, read from the store, for per-member staleness.

In a library run every commit makes a new version of the packed artifact, whatever member it changed. A diff of
one member is only behind the head by the versions that changed a member it edits (`optim.staleness.lag_of`), so
the optimizer's head of the library carries, for the last `span` versions, the members each one changed. They are
read from the store (the source of truth) the first time they are needed and kept, since versions never change;
nothing here needs saving, and a resumed run reads them again.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from agentgrad.core.library import changed_members
from agentgrad.store.sqlite import SQLiteStore

SPAN = 32  # versions back a library head knows the changes of (a diff further behind counts every version)


class MemberChanges:
    """The members each version of a packed library artifact changed, read lazily from `store`."""

    def __init__(self, store: SQLiteStore, artifact_id: str, *, span: int = SPAN) -> None:
        self.store, self.artifact_id, self.span = store, artifact_id, span
        self._changed: dict[int, frozenset[str]] = {}

    def recent(self, head_version: int) -> Mapping[int, frozenset[str]]:
        """For versions `head_version - span + 1` to `head_version` (and from 1), the members each changed."""
        first = max(1, head_version - self.span + 1)
        missing = [v for v in range(first, head_version + 1) if v not in self._changed]
        if missing:
            texts = {v: self.store.version(self.artifact_id, v).text for v in (missing[0] - 1, *missing)}
            for v in missing:
                before = texts.get(v - 1)
                if before is None:
                    before = self.store.version(self.artifact_id, v - 1).text
                self._changed[v] = changed_members(before, texts[v])
        for old in [v for v in self._changed if v < first]:
            del self._changed[old]
        return MappingProxyType({v: self._changed[v] for v in range(first, head_version + 1)})
