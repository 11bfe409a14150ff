"""`OpenDiffs`: the diffs of a run without a final verdict yet (proposals being judged, candidates held for more
evidence), and the changes they make, so that a proposal making the same change meanwhile is caught at once."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from agentgrad.core.diff import Diff, fingerprint


class OpenDiffs:
    """State: the open diffs by id, the id of the first open diff making each change (by `fingerprint`), the
    version each was first held on (`born`: for a proposal, the snapshot it was written on), and those `shelved`:
    open, but left unevaluated because the budget ran out (no worker holds them; the run's end records them).

    `state_dict()` lists the open diffs; a resumed run rebuilds them from its log (`runtime.resume`), so the
    checkpoint does not carry them."""

    def __init__(self) -> None:
        self._diffs: dict[str, Diff] = {}
        self._prints: dict[str, str] = {}
        self._born: dict[str, int] = {}  # -1: not known (held again by a resumed run)
        self._shelved: set[str] = set()

    def __len__(self) -> int:
        return len(self._diffs)

    def __iter__(self) -> Iterator[Diff]:
        return iter(list(self._diffs.values()))

    def __contains__(self, diff_id: object) -> bool:
        return diff_id in self._diffs

    def hold(self, diffs: Sequence[Diff], *, first: bool = True) -> None:
        """Note diffs that have no final verdict yet (`first`: held by this run from the start, so the base of a
        diff not seen before is the version it was born on)."""
        for diff in diffs:
            self._diffs[diff.id] = diff
            self._prints.setdefault(fingerprint(diff), diff.id)
            self._born.setdefault(diff.id, diff.base_version if first else -1)
            self._shelved.discard(diff.id)

    def shelve(self, diff_id: str) -> None:
        """An open diff's evaluation stopped for want of budget: it stays open, and no worker holds it any more."""
        if diff_id in self._diffs:
            self._shelved.add(diff_id)

    @property
    def active(self) -> int:
        """How many open diffs a worker holds or will take up (all but the shelved ones)."""
        return len(self._diffs) - len(self._shelved)

    def born(self, diff_id: str) -> int | None:
        """The version an open diff was first held on (a proposal: the snapshot it was written on), or None if
        that is not known (it is not open, or a resumed run took it over)."""
        version = self._born.get(diff_id, -1)
        return None if version < 0 else version

    def drop(self, diff_id: str, *, final: bool = True) -> Diff | None:
        """A diff got its verdict; the diff, if it was open. A verdict that is not `final` (the diff is held again
        at once, perhaps rebased onto a later head) keeps the version it was born on: the version its origin task
        was picked on for failing stays one the replication test never takes as a fresh context (its text there is
        the one the screen scored: a replica would repeat the screen's win)."""
        diff = self._diffs.pop(diff_id, None)
        if final:
            self._born.pop(diff_id, None)
        self._shelved.discard(diff_id)
        if diff is not None and self._prints.get(fingerprint(diff)) == diff_id:
            del self._prints[fingerprint(diff)]
        return diff

    def twin(self, diff: Diff) -> str | None:
        """The id of an open diff that makes the same change as `diff`, if any."""
        return self._prints.get(fingerprint(diff))

    def state_dict(self) -> dict[str, Any]:
        return {"open": [d.to_dict() for d in self._diffs.values()]}

    def load_state_dict(self, data: Any) -> None:
        """Restore a `state_dict()`; `StateDictError` (or `InvalidOpError` for a bad diff) and nothing changed."""
        from agentgrad.errors import StateDictError

        if not isinstance(data, dict) or not isinstance(data.get("open"), list):
            raise StateDictError(f"bad open diffs state: {data!r:.80}")
        diffs = [Diff.from_dict(d) for d in data["open"]]
        self._diffs, self._prints, self._born, self._shelved = {}, {}, {}, set()
        self.hold(diffs, first=False)
