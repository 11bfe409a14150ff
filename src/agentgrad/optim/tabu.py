"""`tabu`: never evaluate again a change that was already turned down (rejected, dropped or reverted).

Changes are compared by `fingerprint`, which ignores case, white space, op order, base version and author, so a
worker re-proposing a rejected rule in other words of the same normal form is caught before it costs gate calls.
The memory is bounded: past `max_size` fingerprints the oldest is forgotten first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from agentgrad.core._checks import integer
from agentgrad.core.decision import Decision, Outcome
from agentgrad.core.diff import Diff, fingerprint
from agentgrad.errors import ConfigError, StateDictError
from agentgrad.optim.base import Batch, Candidate, Context, Stage, verdict

NAME = "tabu"
TURNED_DOWN = frozenset({Outcome.REJECTED, Outcome.DROPPED, Outcome.REVERTED})


@dataclass(frozen=True)
class TabuState:
    """What `tabu` keeps.

    Args:
        entries: (fingerprint, id of the diff that was turned down), oldest first.
        hits: how many candidates were skipped as tabu.
        pardoned: fingerprints of changes rejected once with wins and no loss (`_thin`), oldest first: the next
            such rejection makes them tabu.
    """

    entries: tuple[tuple[str, str], ...] = ()
    hits: int = 0
    pardoned: tuple[str, ...] = ()
    _index: Mapping[str, str] = field(init=False, repr=False, compare=False, default_factory=dict)

    def __post_init__(self) -> None:
        entries = tuple((str(fp), str(diff_id)) for fp, diff_id in self.entries)
        object.__setattr__(self, "entries", entries)
        object.__setattr__(self, "_index", dict(entries))

    def earlier(self, fp: str) -> str | None:
        """The id of the diff turned down with fingerprint `fp`, or None."""
        return self._index.get(fp)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; `TabuState.load` reverses it."""
        return {"entries": [[fp, diff_id] for fp, diff_id in self.entries], "hits": self.hits,
                "pardoned": list(self.pardoned)}

    @classmethod
    def load(cls, data: Mapping[str, Any]) -> TabuState:
        """Rebuild a state from `to_dict` output; raises `StateDictError` on anything malformed."""
        entries = data.get("entries", [])
        if not isinstance(entries, list) or not all(
                isinstance(e, (list, tuple)) and len(e) == 2 and all(isinstance(x, str) and x for x in e)
                for e in entries):
            raise StateDictError(f"{NAME}: 'entries' must be a list of [fingerprint, diff id] pairs")
        if len({e[0] for e in entries}) != len(entries):
            raise StateDictError(f"{NAME}: 'entries' holds a fingerprint twice")
        hits = integer(data.get("hits", 0), f"{NAME}: 'hits'", low=0, error=StateDictError)
        pardoned = data.get("pardoned", [])
        if not isinstance(pardoned, list) or not all(isinstance(x, str) and x for x in pardoned):
            raise StateDictError(f"{NAME}: 'pardoned' must be a list of fingerprints")
        return cls(tuple((e[0], e[1]) for e in entries), hits, tuple(pardoned))


def _against(decision: Decision) -> bool:
    """True for verdicts whose evidence speaks against the change (not merely too thin to accept it).

    A rejection for lack of significance where the evidence still leaned in favour (P(gain) >= 0.5), one for harm
    by a change that still won more tasks than it lost (a trade judged on the head of its day: losses on tasks the
    head solved by the luck of its own noise draw look like harm), or one resting on a single example, is not made
    tabu: a noisy loss on thin evidence must not ban a right edit for good. Everything DROPPED or REVERTED is.
    """
    if decision.outcome not in TURNED_DOWN:
        return False
    numbers = decision.numbers
    if numbers.get("n", 2.0) < 2:
        return False  # one example (a gate's screen) is too thin to ban a change for good
    if decision.outcome is not Outcome.REJECTED:
        return True
    p, wins, losses = numbers.get("p"), numbers.get("wins", 0.0), numbers.get("losses", 0.0)
    leaning = p is not None and p >= 0.5
    trade = numbers.get("harmful", 0.0) > 0 and wins > losses
    return not leaning and not trade


def _thin(decision: Decision) -> bool:
    """True for a rejection for lack of significance of a change that won tasks and lost none, below P(gain) = 1/2
    only through the acceptance margin (1 win and 0 losses give P(gain > margin) = 0.49). Its first such rejection
    is pardoned: the change may need a rule that lands later (an override needs its base rule); a second makes it
    tabu, so a no-effect change with lucky wins is not tested again and again."""
    numbers = decision.numbers
    return (decision.outcome is Outcome.REJECTED and numbers.get("harmful", 0.0) == 0
            and numbers.get("wins", 0.0) > 0 and numbers.get("losses", 0.0) == 0)


def is_tabu(state: TabuState, diff: Diff) -> bool:
    """True if a change equal to `diff` (same fingerprint) was already rejected, dropped or reverted.

    A runtime calls it before evaluating a proposal, to spend no gate calls on a known reject.
    """
    return state.earlier(fingerprint(diff)) is not None


def tabu(*, max_size: int = 10_000) -> Stage[TabuState]:
    """A stage that marks TABU every candidate whose fingerprint was already turned down.

    Args:
        max_size: most fingerprints remembered; the oldest is forgotten first.
    State: `TabuState` (fingerprint → diff id, oldest first, and the hit count). `observe` learns the
    fingerprints of REJECTED, DROPPED and REVERTED decisions.
    """
    if max_size < 1:
        raise ConfigError(f"{NAME}: max_size must be >= 1, got {max_size}")

    def update(batch: Batch, state: TabuState, ctx: Context) -> tuple[Batch, TabuState]:
        verdicts: dict[str, tuple[Candidate, Decision]] = {}
        for candidate in batch.candidates:
            earlier = state.earlier(fingerprint(candidate.diff))
            if earlier is not None:
                reason = f"the same change as {earlier}, which was already turned down"
                verdicts[candidate.diff.id] = (candidate, verdict(candidate, Outcome.TABU, NAME, reason))
        return batch.settle(verdicts), replace(state, hits=state.hits + len(verdicts))

    def observe(decisions: Sequence[Decision], state: TabuState, ctx: Context) -> TabuState:
        entries, pardoned = dict(state.entries), dict.fromkeys(state.pardoned)
        for decision in decisions:
            fp = decision.fingerprint
            if not fp or fp in entries or not _against(decision):
                continue
            if _thin(decision) and fp not in pardoned:
                pardoned[fp] = None
                continue
            entries[fp] = decision.diff_id
            pardoned.pop(fp, None)
        kept = list(entries.items())[-max_size:]
        return replace(state, entries=tuple(kept), pardoned=tuple(list(pardoned)[-max_size:]))

    return Stage(NAME, TabuState, update, TabuState.load, observe)
