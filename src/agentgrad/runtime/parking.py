"""Candidates held for the replication test (`optim.judge`), waiting for a context they were not scored in yet.

A *context* is the text the origin task is scored on, with and without the change: a later head, or the head with
another change applied (a *sibling*: another waiting candidate, or one of the last changes the run turned down; a
text the run has not scored, so its noise is fresh). A sibling that only adds to the head keeps everything the head
has, so a change that needs an earlier rule still finds it; one that rewrites or drops a line of the head may take
away the very rule the change builds on (a turned-down ``dates: use method 8`` replaces the head's right dates rule,
and an override of dates then fails with and without it: a tie where it should win). When the run winds down
(nothing else left to do: no rollout to come, so no later head) and no such context exists, *last-resort* contexts
serve: first the siblings that rewrite the head, then the head with one earlier commit taken out (the oldest first:
all the head has but one rule, so an override whose base rule came last still finds it, where every earlier version
lacks it; only a commit for tasks far from the candidate's origin, or the change could win there by standing in for
the rule taken out), then those with a sibling's change applied, then earlier committed versions, then those with a
sibling's change applied (a rare category's rule with one training task and no validation task can only be judged on
its origin task, and a short run has few versions: without these it was left undecided with calls unused). Their
noise is as fresh; only a change that needs what they lack can lose there, which costs power, never safety. Which
context comes next never depends on the candidate's scores, only on the texts and the tasks changes came from. A
replica row's id names its context: ``<origin task>@<first 12 hex digits of the context's hash>``.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace

from agentgrad.core.artifact import content_hash
from agentgrad.core.diff import Diff
from agentgrad.core.evidence import REPLICA_MARK, replica_context
from agentgrad.optim.base import Candidate
from agentgrad.optim.judge import may_close

MARK = REPLICA_MARK
SPARES = 16  # turned-down changes kept as possible siblings
TRIES = 4  # siblings tried per waiting candidate (and one more per replica it has) at each look
EARLIER = 8  # earlier versions (the latest first), and commits taken out, tried as last-resort contexts



@dataclass(frozen=True)
class Earlier:
    """A last-resort context: an earlier committed version of the artifact, whole, or (`via`: the sibling's diff
    id) with a sibling's change applied; or (`without`: the number of the version a commit made; `taken`: the
    tasks that commit was proposed from) the head with that commit's change taken out (`version` is then the
    head's)."""

    version: int
    text: str
    via: str | None = None
    without: int | None = None
    taken: tuple[str, ...] = ()


Context = Diff | Earlier  # a sibling change applied to the head, or (last resort) an earlier version
Made = dict[tuple[int, int | None, str], Earlier | None]  # (version, commit taken out, sibling id) -> combined


def context_key(text: str) -> str:
    """The short name of a context text in replica ids."""
    return content_hash(text)[:12]


def replica_id(origin: str, context: str) -> str:
    """The id of the replica row of `origin` scored in the context `context` (its text)."""
    return f"{origin}{MARK}{context_key(context)}"


def used_contexts(candidate: Candidate) -> set[str]:
    """The context keys of `candidate`'s replica rows."""
    return {replica_context(r) for r in candidate.evidence.replicas}


class Parking:
    """Candidates waiting to replicate (by diff id), and the sibling chosen as the next context of each released
    one."""

    def __init__(self) -> None:
        self.waiting: dict[str, Candidate] = {}
        self.siblings: dict[str, Context] = {}
        self.winding_down = False  # set once the run has nothing else to do: earlier versions may be contexts
        self.stranded: frozenset[str] = frozenset()  # waiting with no context left even while winding down
        self.spares: list[Diff] = []
        self.base_keys: dict[tuple[str, int], str] = {}  # (artifact, version) -> its text's context key
        self.released: dict[str, int] = {}  # diff id -> replicas it had when last released (until parked again)

    def offer(self, diffs: Sequence[Diff]) -> None:
        """Keep turned-down changes as possible siblings (the last `SPARES` of them, newest first)."""
        self.spares = [*reversed(diffs), *self.spares][:SPARES]

    def __len__(self) -> int:
        return len(self.waiting)

    @property
    def origins(self) -> frozenset[str]:
        """The origin tasks of the waiting candidates (a rollout there would only propose one of them again)."""
        return frozenset(c.origin for c in self.waiting.values() if c.origin is not None)

    def replica_counts(self) -> list[int]:
        """The replicas each waiting candidate has, the stranded ones left out (only a new head could place
        them): what `runtime.split.replication_reserve` keeps calls for."""
        return [len(c.evidence.replicas) for i, c in self.waiting.items() if i not in self.stranded]

    def out_for_replication(self, still_open: Container[str]) -> list[int]:
        """The replicas each candidate released for its next context, and not back nor decided yet (in
        `still_open`), had when released: a replication on its way still needs its calls, and more contexts may
        follow (`runtime.split.replication_reserve`). Entries no longer open are forgotten."""
        for diff_id in [i for i in self.released if i not in still_open]:
            del self.released[diff_id]
        return list(self.released.values())

    def park(self, candidate: Candidate) -> None:
        self.waiting[candidate.diff.id] = candidate
        self.siblings.pop(candidate.diff.id, None)
        self.released.pop(candidate.diff.id, None)

    def close(self, final: bool = False) -> list[Candidate]:
        """Take out the `stranded` candidates (in the order parked), marked for their closing look
        (`Candidate.closing`): only when nothing still in flight could make a new head for them. `final`: the calls
        are spent, so every waiting candidate that `may_close` (enough contexts to pass) is taken; the others stay
        waiting, undecided."""
        out = [replace(c, closing=True) for i, c in self.waiting.items()
               if (may_close(len(c.evidence.replicas)) if final else i in self.stranded)]
        for candidate in out:
            del self.waiting[candidate.diff.id]
            self.siblings.pop(candidate.diff.id, None)
        self.stranded = frozenset()
        return out

    def release(self, fresh: Callable[[Candidate, Context | None], bool],
                earlier: Callable[[], Sequence[Earlier]] = tuple,
                keeps: Callable[[Diff], bool] = lambda sibling: True,
                combine: Callable[[Earlier, Diff], Earlier | None] = lambda version, sibling: None,
                pick: Callable[[list[Candidate]], tuple[list[Candidate], list[Candidate]]] | None = None
                ) -> list[Candidate]:
        """Take out (in the order parked) the candidates that can replicate now: on the head when `fresh(c, None)`,
        else on the head with the first of its tries (`TRIES`, plus one for each replica it has: the siblings come
        in a fixed order, so those it was scored with must not use up its tries) of the siblings that `keeps` the
        head whole (other waiting candidates' changes, then the spares) for which `fresh(c, sibling)`; else, while
        `winding_down`, with the first of as many siblings that do not keep it, then in the first of the contexts
        made of `earlier()` (read once, and only if a candidate needs one), each alone or `combine`d with one of as
        many siblings, that is fresh for it (in `_last_resort`'s order; the context chosen is noted in `siblings`).
        While winding down, those left waiting are `stranded` until the next release. Of those that can go, `pick`
        (when given: `runtime.split.triage`) says which go now and which wait (not stranded). The ones taken out are
        noted in `released` (with the replicas they had) until parked again."""
        ready = [c for c in self.waiting.values() if fresh(c, None)]
        rest = [c for c in self.waiting.values() if c not in ready]
        whole: dict[str, bool] = {}  # sibling id -> keeps(sibling), asked once per release
        versions: Sequence[Earlier] | None = None
        made: Made = {}  # combined contexts, asked once a release
        for candidate in rest:
            others = [s.diff for s in rest if s is not candidate] + self.spares
            tiers, tries = _tiers(others, keeps, whole), TRIES + len(candidate.evidence.replicas)
            sibling: Context | None = next((d for d in tiers[0][:tries] if fresh(candidate, d)), None)
            if sibling is None and self.winding_down:
                sibling = next((d for d in tiers[1][:tries] if fresh(candidate, d)), None)
            if sibling is None and self.winding_down:
                versions = earlier() if versions is None else versions
                options = _last_resort(versions, [*tiers[0], *tiers[1]][:tries], combine, made)
                sibling = next((c for c in options if fresh(candidate, c)), None)
            if sibling is not None:
                self.siblings[candidate.diff.id] = sibling
                ready.append(candidate)
        ready, later = (ready, []) if pick is None or not ready else pick(ready)
        for candidate in later:
            self.siblings.pop(candidate.diff.id, None)
        for candidate in ready:
            del self.waiting[candidate.diff.id]
            self.released[candidate.diff.id] = len(candidate.evidence.replicas)
        self.stranded = frozenset(self.waiting).difference(c.diff.id for c in later) if self.winding_down \
            else frozenset()
        return ready


def _last_resort(versions: Sequence[Earlier], siblings: Sequence[Diff],
                 combine: Callable[[Earlier, Diff], Earlier | None],
                 made: Made) -> Iterator[Earlier]:
    """The last-resort contexts made of `versions`, in order: the heads without a commit, then those with each of
    `siblings`' changes, then the plain earlier versions, then those with each sibling's change (the ones that
    keep the most of the head first)."""
    for group in ([v for v in versions if v.without is not None], [v for v in versions if v.without is None]):
        yield from group
        yield from _combined(((v, d) for v in group for d in siblings), combine, made)


def _combined(pairs: Iterable[tuple[Earlier, Diff]], combine: Callable[[Earlier, Diff], Earlier | None],
              made: Made) -> Iterator[Earlier]:
    """The combined contexts of `pairs` that exist, made lazily; `made` caches `combine`."""
    for version, sibling in pairs:
        key = (version.version, version.without, sibling.id)
        if key not in made:
            made[key] = combine(version, sibling)
        context = made[key]
        if context is not None:
            yield context


def _tiers(others: Sequence[Diff], keeps: Callable[[Diff], bool],
           whole: dict[str, bool]) -> tuple[list[Diff], list[Diff]]:
    """(the siblings that keep the head whole, those that do not), each in order; `whole` caches `keeps`."""
    for diff in others:
        if diff.id not in whole:
            whole[diff.id] = keeps(diff)
    return [d for d in others if whole[d.id]], [d for d in others if not whole[d.id]]


__all__ = ["EARLIER", "MARK", "SPARES", "TRIES", "Context", "Earlier", "Parking", "context_key", "replica_id",
           "used_contexts"]
