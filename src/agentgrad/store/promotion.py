"""`Promotion`: when to try moving `stable` up to `dev` — after every K accepted commits, once confirmed.

Pure policy, no I/O: the runtime tells it about accepted commits; when it answers True, the runtime checks the dev
heads on held-out data and reports the result with `confirm` (then calls `store.promote` if it passed).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentgrad.core._checks import flag, integer
from agentgrad.core.ids import validate_id
from agentgrad.errors import InvalidIdError, StateDictError


def _count(value: object, what: str, *, least: int = 0) -> int:
    return integer(value, f"promotion state: {what}", low=least, error=StateDictError)


class Promotion:
    """Asks for a promotion after every `every` accepted commits.

    Args:
        every: K, the accepted commits between promotion attempts (>= 1).
    State: accepted commits per artifact since the last promotion (`since`), the count at which the next attempt
    is due, and whether an attempt is waiting for `confirm`. A failed check keeps the commits counted and asks
    again after K more.

    >>> policy = Promotion(2)
    >>> policy.observe_accepted("skills/a"), policy.observe_accepted("skills/b")
    (False, True)
    >>> policy.confirm(True); policy.pending
    ()
    """

    def __init__(self, every: int) -> None:
        self.every = integer(every, "Promotion(every=...)", low=1)
        self._since: dict[str, int] = {}
        self._due = every
        self._waiting = False

    @property
    def count(self) -> int:
        """Accepted commits since the last promotion."""
        return sum(self._since.values())

    @property
    def pending(self) -> tuple[str, ...]:
        """The artifacts changed since the last promotion, sorted."""
        return tuple(sorted(self._since))

    def observe_accepted(self, artifact_id: str) -> bool:
        """Count one accepted commit; True when K have accumulated and a promotion attempt is now due."""
        validate_id(artifact_id)
        self._since[artifact_id] = self._since.get(artifact_id, 0) + 1
        if self._waiting or self.count < self._due:
            return False
        self._waiting = True
        return True

    def confirm(self, passed: bool) -> None:
        """Report the held-out check: passed resets the counter; failed keeps it and asks again after K more."""
        if passed:
            self._since, self._due = {}, self.every
        else:
            self._due = self.count + self.every
        self._waiting = False

    def state_dict(self) -> dict[str, Any]:
        """A JSON-ready snapshot."""
        return {"every": self.every, "since": dict(sorted(self._since.items())), "due": self._due,
                "waiting": self._waiting}

    def load_state_dict(self, data: Mapping[str, Any]) -> None:
        """Restore a snapshot; validates all of it before changing anything (`StateDictError` if bad)."""
        if not isinstance(data, Mapping) or set(data) != {"every", "since", "due", "waiting"}:
            got = sorted(data) if isinstance(data, Mapping) else type(data).__name__
            raise StateDictError(f"promotion state needs keys every, since, due, waiting; got {got}")
        if data["every"] != self.every:
            raise StateDictError(f"promotion state is for every={data['every']!r}, this policy has every={self.every}")
        since = data["since"]
        if not isinstance(since, Mapping):
            raise StateDictError(f"promotion state: since must be a dict, got {type(since).__name__}")
        for artifact_id, count in since.items():
            try:
                validate_id(artifact_id)
            except InvalidIdError as exc:
                raise StateDictError(f"promotion state: {exc}") from exc
            _count(count, f"since[{artifact_id!r}]", least=1)
        due = _count(data["due"], "due", least=1)
        waiting = flag(data["waiting"], "promotion state: waiting", error=StateDictError)
        self._since, self._due, self._waiting = dict(since), due, waiting
