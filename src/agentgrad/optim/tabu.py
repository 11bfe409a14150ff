"""`tabu`: do not evaluate again a change that was turned down (rejected, dropped or reverted) on the head of its day.

Changes are compared by `fingerprint`, which ignores case, white space, op order, base version and author, so a
worker re-proposing a rejected rule in other words of the same normal form is caught before it costs gate calls.
The memory is bounded: past `max_size` fingerprints the oldest is forgotten first.

A change turned down only for want of significance (no harm found) was judged against the head of its day, and
its gain may need a rule that had not landed yet: a format rule is worth little until the rules it formats are
there. Its ban lapses once the head has moved `renew` versions past the one it was judged on; a proposal of it
after that is evaluated afresh (and, turned down again, banned again from that head on). So does the first ban for
harm: losses are judged against the head of its day and the noise draw of that one text, and with only a few
tasks the head solved, two unlucky losses read as harm (a right rule for a category with no other task was banned
this way, and re-proposed 57 times in vain). A second rejection for harm bans for good; drops and reverts never
lapse.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from agentgrad.core._checks import integer, is_integer
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
        lapse: (fingerprint, head version) for bans that end once the head reaches that version.
        harmed: fingerprints rejected for harm once, oldest first: a second rejection for harm bans for good.
    """

    entries: tuple[tuple[str, str], ...] = ()
    hits: int = 0
    pardoned: tuple[str, ...] = ()
    lapse: tuple[tuple[str, int], ...] = ()
    harmed: tuple[str, ...] = ()
    _index: Mapping[str, str] = field(init=False, repr=False, compare=False, default_factory=dict)
    _lapse: Mapping[str, int] = field(init=False, repr=False, compare=False, default_factory=dict)

    def __post_init__(self) -> None:
        entries = tuple((str(fp), str(diff_id)) for fp, diff_id in self.entries)
        object.__setattr__(self, "entries", entries)
        object.__setattr__(self, "_index", dict(entries))
        object.__setattr__(self, "lapse", tuple((str(fp), int(v)) for fp, v in self.lapse))
        object.__setattr__(self, "_lapse", dict(self.lapse))

    def earlier(self, fp: str, version: int | None = None) -> str | None:
        """The id of the diff turned down with fingerprint `fp`, or None (also when its tabu has lapsed by head
        `version`)."""
        ends = self._lapse.get(fp)
        if ends is not None and version is not None and version >= ends:
            return None
        return self._index.get(fp)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; `TabuState.load` reverses it."""
        return {"entries": [[fp, diff_id] for fp, diff_id in self.entries], "hits": self.hits,
                "pardoned": list(self.pardoned), "lapse": [[fp, v] for fp, v in self.lapse],
                "harmed": list(self.harmed)}

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
        pardoned, harmed = data.get("pardoned", []), data.get("harmed", [])
        for name, value in (("pardoned", pardoned), ("harmed", harmed)):
            if not isinstance(value, list) or not all(isinstance(x, str) and x for x in value):
                raise StateDictError(f"{NAME}: {name!r} must be a list of fingerprints")
        lapse = data.get("lapse", [])
        if not isinstance(lapse, list) or not all(
                isinstance(e, (list, tuple)) and len(e) == 2 and isinstance(e[0], str) and is_integer(e[1], low=0)
                for e in lapse):
            raise StateDictError(f"{NAME}: 'lapse' must be a list of [fingerprint, version] pairs")
        return cls(tuple((e[0], e[1]) for e in entries), hits, tuple(pardoned),
                   tuple((e[0], int(e[1])) for e in lapse), tuple(harmed))


def _against(decision: Decision) -> bool:
    """True for verdicts whose evidence speaks against the change (not merely too thin to accept it).

    A rejection for lack of significance where the evidence still leaned in favour (P(gain) >= 0.5), one for harm
    by a change that still won more tasks than it lost (a trade judged on the head of its day: losses on tasks the
    head solved by the luck of its own noise draw look like harm), or one resting on a single example, is not made
    tabu: a noisy loss on thin evidence must not ban a right edit for good. Nor is a failed replication whose
    contexts still favour the change (`favoured`, `optim.acceptance`): its evidence adds up over its proposals.
    Everything DROPPED or REVERTED is.
    """
    if decision.outcome not in TURNED_DOWN:
        return False
    numbers = decision.numbers
    if numbers.get("n", 2.0) < 2:
        return False  # one example (a gate's screen) is too thin to ban a change for good
    if decision.outcome is not Outcome.REJECTED:
        return True
    p, wins, losses = numbers.get("p"), numbers.get("wins", 0.0), numbers.get("losses", 0.0)
    leaning = (p is not None and p >= 0.5) or numbers.get("favoured", 0.0) > 0
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


def _lapses(decision: Decision, harmed: Collection[str]) -> bool:
    """True if the ban `decision` starts may lapse: a rejection for want of significance with no harm, or the first
    rejection for harm (its fingerprint not in `harmed` yet; a second one bans for good)."""
    if decision.outcome is not Outcome.REJECTED:
        return False
    return decision.numbers.get("harmful", 0.0) == 0 or decision.fingerprint not in harmed


def _learned(state: TabuState, decisions: Sequence[Decision], ctx: Context, *, renew: int | None,
             max_size: int) -> TabuState:
    """`state` with the changes `decisions` turned down banned (the first thin rejection pardoned; a rejection for
    want of significance with no harm, or a first one for harm, banned until the head reaches `renew` versions
    past the one of its day)."""
    entries, pardoned, lapse = dict(state.entries), dict.fromkeys(state.pardoned), dict(state.lapse)
    harmed = dict.fromkeys(state.harmed)
    for decision in decisions:
        fp = decision.fingerprint
        head = ctx.heads.get(decision.artifact_id)
        version = None if head is None else head.version
        ends = lapse.get(fp)
        standing = fp in entries and (ends is None or version is None or version < ends)
        if not fp or standing or not _against(decision):
            continue
        if _thin(decision) and fp not in pardoned:
            pardoned[fp] = None
            continue
        entries.pop(fp, None)  # a lapsed ban turned down again counts from now on
        entries[fp] = decision.diff_id
        pardoned.pop(fp, None)
        lapse.pop(fp, None)
        if _lapses(decision, harmed) and renew is not None and version is not None:
            lapse[fp] = version + renew
        if decision.outcome is Outcome.REJECTED and decision.numbers.get("harmful", 0.0) > 0:
            harmed[fp] = None
    kept = dict(list(entries.items())[-max_size:])
    return replace(state, entries=tuple(kept.items()), pardoned=tuple(list(pardoned)[-max_size:]),
                   lapse=tuple((fp, v) for fp, v in lapse.items() if fp in kept),
                   harmed=tuple(list(harmed)[-max_size:]))


def is_tabu(state: TabuState, diff: Diff) -> bool:
    """True if a change equal to `diff` (same fingerprint) was already rejected, dropped or reverted, and its ban
    has not lapsed by `diff`'s base version.

    A runtime calls it before evaluating a proposal, to spend no gate calls on a known reject.
    """
    return state.earlier(fingerprint(diff), diff.base_version) is not None


def tabu(*, max_size: int = 10_000, renew: int | None = 1) -> Stage[TabuState]:
    """A stage that marks TABU every candidate whose fingerprint was already turned down.

    Args:
        max_size: most fingerprints remembered; the oldest is forgotten first.
        renew: a change rejected for want of significance with no harm, or for harm the first time, is tabu until
            the head has moved this many versions past the one it was judged on (None: for good).
    State: `TabuState` (fingerprint → diff id, oldest first, the hit count, the pardons, the lapsing bans and the
    changes rejected for harm once).
    `observe` learns the fingerprints of REJECTED, DROPPED and REVERTED decisions.
    """
    if max_size < 1:
        raise ConfigError(f"{NAME}: max_size must be >= 1, got {max_size}")
    if renew is not None:
        integer(renew, f"{NAME}: renew", low=1)

    def update(batch: Batch, state: TabuState, ctx: Context) -> tuple[Batch, TabuState]:
        verdicts: dict[str, tuple[Candidate, Decision]] = {}
        for candidate in batch.candidates:
            head = ctx.heads.get(candidate.diff.artifact_id)
            earlier = state.earlier(fingerprint(candidate.diff), None if head is None else head.version)
            if earlier is not None:
                reason = f"the same change as {earlier}, which was already turned down"
                verdicts[candidate.diff.id] = (candidate, verdict(candidate, Outcome.TABU, NAME, reason))
        return batch.settle(verdicts), replace(state, hits=state.hits + len(verdicts))

    def observe(decisions: Sequence[Decision], state: TabuState, ctx: Context) -> TabuState:
        return _learned(state, decisions, ctx, renew=renew, max_size=max_size)

    return Stage(NAME, TabuState, update, TabuState.load, observe)
