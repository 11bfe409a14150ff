"""`accept_if`: commit a diff only if its evidence shows a significant improvement.

The test (see `stats.prob_improvement`; by default the exact sign test): accept when P(improvement > margin) >
1 − δ_look, with δ read from a schedule of the artifact's head version and split between the evidence's looks. A
candidate is judged on its first look at `first_share` of δ; one that fails there but is *promising* (P(gain > 0)
at least `promise`) is held (`Outcome.EXTEND`) and the runtime scores it on more tasks, its evidence so far kept;
its later looks share the rest of δ. By the union bound the false-accept rate of the whole procedure stays at most
δ, and evidence accumulates instead of starting again. An exact tie is never accepted, nor extended. Candidates
that pass but cannot be committed yet are held: rebased ones for a re-check on the current head, L1 ones without a
full held-out check, and (with `best_only`) every passer but the best one per artifact in this step.

A candidate with an origin task that fails its first look without being promising, but with no harm, is held to
*replicate* instead (its gain may have no like task to show on: a rare category): its later look is the replication
test (`optim.judge`), its origin task scored again in fresh contexts (later heads, or the head with another change),
`optim.judge.REPLICAS` of them by design (and `EXTRA_REPLICAS` more for one a full win short after them); it waits
while the test is not passed yet and still can be. (The runtime also replicates a promising candidate whose plan has
no more tasks like its origin to score, or only ones the base already solves.) Which of the two a later look is
follows from the first look's evidence, the task inputs and the base's scores alone, so each keeps its share of δ;
stopping the replication early either way (curtailment) leaves its test exact.

A run sends many candidates to the replication test (tasks no proposal fixes send one after another), and each
would pass by noise at up to the test's level. So the level is spent: a candidate is tested at 1/(k + 1) of it,
k the candidates that failed the test before it, from its own origin task or since this stage last accepted a
change, whichever is more (the state's `replicated` and `since_accepted`). Between two accepted changes, the chance
that any of K no-effect candidates passes is then at most the level times the harmonic number H(K) (3.6 at K =
20) instead of K times it, and each accepted change starts the count again, as in online false-discovery
control, where a discovery earns back the level: the junk expected among the committed changes stays a small
share of them. A clean 5 of 5 still passes at q_r = 0.16 after up to 27 failures, and 4 of 5 at q_r = 0.06
after up to 47; a 4 of 5 that misses the lowered level may pass in the second stage (below).

With the defaults (δ = 0.05, margin 0.02, two looks, first share 0.7) a change with no loss commits on its first
look from 5 wins (0.51^5 = 0.0345 <= 0.035), and on its second from 7; by replication (at 0.2 of the second look's
0.015), on 3 full wins in at most 5 fresh contexts while the noise bound q_r is at most 0.06, on 4 up to 0.16, and
on 5 of 5 up to the cap of 1/4; one full win short after 5, 3 more contexts follow, and 1 win in them passes while
q_r is at most 0.10 (after 3 of 5) or 0.19 (after 4 of 5), 2 up to 0.14 or 0.25.

A change proposed again (the same fingerprint) after an earlier proposal of it was scored in other contexts is
judged on the contexts of all its proposals by an e-process instead (`optim.pooled`), at the level its own test
would have had.

A change one proposal of which was turned down at a later look (held for more tasks as promising, or replicating),
with no harm, is *spent* for extension (the state's `spent`): a later proposal of it that fails its first look
replicates instead of being held for more tasks. On the same head its extension would score the same tasks, their
answers cached, and end the same (a right override was proposed 184 times in one run, each 3 wins on 8 focus tasks,
p = 0.044 against 0.035, then 3 of 9 at the second look, and never committed). The path is chosen from earlier
proposals, so each look keeps its share of δ. A failed replication whose contexts still favour the change
(`pooled.favours`) says so (`favoured` in its numbers), and `optim.tabu` does not ban it: a proposal of it again is
judged on those contexts and new ones together (`optim.pooled`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from agentgrad.core._checks import integer, is_integer, number
from agentgrad.core.artifact import Layer
from agentgrad.core.decision import Decision, Outcome
from agentgrad.core.diff import fingerprint
from agentgrad.core.evidence import Evidence, Row, replica_origin
from agentgrad.errors import StateDictError, UnknownArtifactError
from agentgrad.optim.base import Batch, Candidate, Context, Head, Stage, verdict
from agentgrad.optim.judge import REPLICA_SHARE, Judgement, judge, may_replicate
from agentgrad.optim.pooled import Replays, favours, judge_pooled, may_go_on
from agentgrad.optim.schedules import Schedule, delta_schedule
from agentgrad.optim.stats import SIGN_TEST_PRIOR, check_margin, check_prior

STAGE = "accept"
_HELD = (Outcome.RECHECK, Outcome.FULL_CHECK, Outcome.DEFERRED, Outcome.EXTEND)


def look_delta(delta: float, look: int, *, looks: int, first_share: float) -> float:
    """The share of δ that look number `look` (1, 2, ...) of at most `looks` is tested at: all of δ with one look;
    else `first_share` of it on the first and an even split of the rest on each later one (they sum to δ)."""
    if looks <= 1:
        return delta
    if look <= 1:
        return delta * first_share
    return delta * (1.0 - first_share) / (looks - 1)


def check_looks(looks: int, first_share: float, promise: float) -> None:
    """`ConfigError` unless looks is an int >= 1 and first_share and promise are in (0, 1) (promise above 1/2, so
    a tie is never extended)."""
    integer(looks, "looks", low=1)
    number(first_share, "first_share", above=0.0, below=1.0)
    number(promise, "promise", above=0.5, below=1.0)


def _load_counts(data: Mapping[str, Any], key: str) -> dict[str, int]:
    counts = data.get(key, {})
    if not isinstance(counts, Mapping) or not all(
            isinstance(k, str) and is_integer(v, low=0) for k, v in counts.items()):
        raise StateDictError(f"{STAGE}: {key!r} must map ids to non-negative ints, got {counts!r}")
    return dict(counts)


_COUNTS = ("accepted", "rejected", "held", "replicated")
MOST_SPENT = 10_000  # changes whose spent extension is remembered (the oldest is forgotten first)


@dataclass(frozen=True)
class AcceptanceState:
    """Per-artifact counts of the verdicts this stage gave: accepted, rejected, and held for more evidence; and how
    the replication test's level is spent (module doc): per origin task, how many candidates failed the test from it
    (`replicated`), and how many failed it since this stage last accepted a change (`since_accepted`); the pooled
    replication evidence (`replays`); and the changes (fingerprints, oldest first) a proposal of which was turned
    down at a later look with no harm (`spent`: a later proposal of one replicates instead of being extended)."""

    accepted: Mapping[str, int] = field(default_factory=dict)
    rejected: Mapping[str, int] = field(default_factory=dict)
    held: Mapping[str, int] = field(default_factory=dict)
    replicated: Mapping[str, int] = field(default_factory=dict)
    since_accepted: int = 0
    replays: Replays = field(default_factory=Replays)
    spent: tuple[str, ...] = ()
    _spent: frozenset[str] = field(init=False, repr=False, compare=False, default=frozenset())

    def __post_init__(self) -> None:
        for name in _COUNTS:
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))
        object.__setattr__(self, "spent", tuple(dict.fromkeys(self.spent))[-MOST_SPENT:])
        object.__setattr__(self, "_spent", frozenset(self.spent))

    def is_spent(self, candidate: Candidate) -> bool:
        """True if `candidate`'s change is spent for extension (`spent`)."""
        return fingerprint(candidate.diff) in self._spent

    def to_dict(self) -> dict[str, Any]:
        return {**{name: dict(getattr(self, name)) for name in _COUNTS}, "since_accepted": self.since_accepted,
                "replays": self.replays.to_dict(), "spent": list(self.spent)}

    @classmethod
    def load(cls, data: Mapping[str, Any]) -> AcceptanceState:
        """Read `to_dict` output back, refusing anything malformed (`StateDictError`); `replicated` and
        `since_accepted`, `replays` and `spent` may be missing (a state dict from before they were kept)."""
        if not isinstance(data, Mapping) or set(data) - {*_COUNTS, "since_accepted", "replays", "spent"}:
            raise StateDictError(f"{STAGE}: unexpected state dict {data!r}")
        since = data.get("since_accepted", 0)
        if not is_integer(since, low=0):
            raise StateDictError(f"{STAGE}: 'since_accepted' must be a non-negative int, got {since!r}")
        accepted, rejected, held, replicated = (_load_counts(data, name) for name in _COUNTS)
        replays = Replays.load(data["replays"]) if "replays" in data else Replays()
        spent = data.get("spent", [])
        if not isinstance(spent, list) or not all(isinstance(fp, str) and fp for fp in spent):
            raise StateDictError(f"{STAGE}: 'spent' must be a list of fingerprints, got {spent!r}")
        return cls(accepted, rejected, held, replicated, since, replays, tuple(spent))

    def tried(self, evidence: Evidence) -> int:
        """For evidence with replica rows, how many candidates failed the replication test before it, counted
        from its origin task(s) or since a change was last accepted, whichever is more; 0 without replica rows."""
        if not evidence.replicas:
            return 0
        return max(self.since_accepted, *(self.replicated.get(replica_origin(t), 0) for t in evidence.replicas))

    def failed_replication(self, evidence: Evidence) -> AcceptanceState:
        """A new state with one more failed replication test counted for each origin task of `evidence`."""
        replicated = dict(self.replicated)
        for origin in {replica_origin(t) for t in evidence.replicas}:
            replicated[origin] = replicated.get(origin, 0) + 1
        return replace(self, replicated=replicated, since_accepted=self.since_accepted + 1)

    def spent_after(self, candidate: Candidate, post: Judgement, decision: Decision) -> AcceptanceState:
        """A new state with `candidate`'s change marked spent if `decision` turned it down at a later look (held
        for more tasks as promising, or replicating), with no harm: the same change proposed again would be held
        for the same tasks, its answers cached on the same head, and judged the same (module doc)."""
        if decision.outcome is not Outcome.REJECTED or candidate.looks < 2 or post.harmful \
                or candidate.origin is None:
            return self
        return replace(self, spent=(*self.spent, fingerprint(candidate.diff)))

    def counted(self, decisions: Sequence[Decision]) -> AcceptanceState:
        """A new state with `decisions` added to the counts."""
        accepted, rejected, held = dict(self.accepted), dict(self.rejected), dict(self.held)
        for decision in decisions:
            if decision.outcome is Outcome.ACCEPTED:
                target = accepted
            elif decision.outcome is Outcome.REJECTED:
                target = rejected
            elif decision.outcome in _HELD:
                target = held
            else:
                continue
            target[decision.artifact_id] = target.get(decision.artifact_id, 0) + 1
        return replace(self, accepted=accepted, rejected=rejected, held=held)


def head_of(ctx: Context, artifact_id: str, stage: str = STAGE) -> Head:
    """The head of `artifact_id` in `ctx`, or `UnknownArtifactError` naming the `stage` that asked."""
    head = ctx.heads.get(artifact_id)
    if head is None:
        raise UnknownArtifactError(f"{stage}: no head for artifact {artifact_id!r} in the context")
    return head


def _judge(candidate: Candidate, post: Judgement, head: Head, min_examples: int,
           promising: bool) -> Decision | None:
    """The verdict for one candidate, or None if it may be accepted (subject to `best_only`). `promising`: it
    fails, but may still get another look."""
    numbers = post.numbers()
    numbers["look"] = float(candidate.looks)
    if head.layer is Layer.L0:
        return verdict(candidate, Outcome.REFUSED, STAGE, "the artifact is L0 (frozen): nothing may change it",
                       numbers)
    if post.total.n == 0 and min_examples > 0:
        return verdict(candidate, Outcome.REJECTED, STAGE, "no task scored: the gate found that even a win on every "
                       f"task of its plan could not pass ({post.describe()})", numbers)
    if post.total.n < min_examples:
        return verdict(candidate, Outcome.REJECTED, STAGE,
                       f"only {post.total.n} example(s), fewer than the {min_examples} required", numbers)
    if not post.passes and promising:
        return verdict(candidate, Outcome.EXTEND, STAGE,
                       f"promising, not yet significant: {post.describe()}; held for more tasks (look "
                       f"{candidate.looks + 1})", numbers)
    if not post.passes:
        look = f" on look {candidate.looks}" if candidate.looks > 1 else ""
        what = "harmful" if post.harmful else "not significant"
        numbers["harmful"] = float(post.harmful)
        return verdict(candidate, Outcome.REJECTED, STAGE, f"{what}{look}: {post.describe()}", numbers)
    return held_before_commit(candidate, head, "passes", post.describe(), numbers)


def held_before_commit(candidate: Candidate, head: Head, verb: str, described: str,
                       numbers: Mapping[str, float]) -> Decision | None:
    """RECHECK for a passer whose evidence is from an older head, FULL_CHECK for an L1 passer checked on a subset,
    else None (it may be committed). `verb` and `described` say how it passed, for the reason."""
    if candidate.recheck:
        return verdict(candidate, Outcome.RECHECK, STAGE, f"{verb} on evidence from an older head ({described}); "
                       f"re-check on version {head.version} before commit", numbers)
    if head.layer is Layer.L1 and not candidate.evidence.full:
        return verdict(candidate, Outcome.FULL_CHECK, STAGE,
                       f"L1 change {verb} on a subset ({described}); needs a full held-out check", numbers)
    return None


def _replicating(candidate: Candidate, post: Judgement, spent: bool) -> Decision:
    """EXTEND for a candidate held (again) to have its origin task scored on the next head (`spent`: a proposal of
    its change was turned down at a later look before)."""
    numbers = {**post.numbers(), "look": float(candidate.looks), "replicas": float(len(candidate.evidence.replicas))}
    if candidate.evidence.replicas:
        why = f"replicating, not yet significant: {post.describe()}; held for another context"
    else:
        before = ("; a proposal of this change was turned down at a later look before, so this one replicates"
                  if spent else "")
        why = (f"not significant, no harm: {post.describe()}; held to score its origin task again on later heads "
               f"(look {candidate.looks + 1}, a replication{before})")
    return verdict(candidate, Outcome.EXTEND, STAGE, why, numbers)


def _shared(decision: Decision, tried: int) -> Decision:
    """`decision` with its reason saying the replication test's level was shared with `tried` candidates that
    failed it before (module doc)."""
    if not tried:
        return decision
    share = (f" (the replication test's level is 1/{tried + 1} of its share of δ: {tried} candidate(s) failed "
             "it from this origin task, or since a change was last accepted)")
    return replace(decision, reason=decision.reason + share, numbers={**decision.numbers, "replication_tried": tried})


def _favoured(decision: Decision, evidence: Evidence, ctx: Context) -> Decision:
    """`decision` (a failed replication test) marked `favoured` when its replica rows still favour the change
    (`pooled.favours`): it is then not banned (`optim.tabu`), and a proposal of it again may be judged on these
    contexts and new ones together (`optim.pooled`)."""
    if not favours(list(evidence.replica_rows()), ctx.noise):
        return decision
    return replace(decision, reason=decision.reason + "; its contexts still favour the change, kept for a proposal "
                   "of it again", numbers={**decision.numbers, "favoured": 1.0})


def _pooled_look(state: AcceptanceState, candidate: Candidate, post: Judgement, risk: float, ctx: Context
                 ) -> tuple[Judgement, tuple[list[Row], int] | None, AcceptanceState]:
    """(the judgement, by the pooled test across its change's proposals when that is its test (`optim.pooled`);
    its rows and how many are new since the test began, or None; the state with the candidate's replica rows
    kept)."""
    pooled = state.replays.rows_for(candidate, ctx.noise)
    if pooled is not None:
        post = judge_pooled(post, pooled[0], alpha=risk * REPLICA_SHARE, noise=ctx.noise)
    return post, pooled, replace(state, replays=state.replays.seen(candidate, ctx.noise))


def _rank(entry: tuple[Candidate, Judgement]) -> tuple[float, float, str]:
    candidate, post = entry
    return post.p_value, -(post.total.wins - post.total.losses), candidate.diff.id


def _pick(passers: Sequence[tuple[Candidate, Judgement]], best_only: bool) -> dict[str, tuple[Candidate, Decision]]:
    """ACCEPTED verdicts for the passers; with `best_only`, DEFERRED for all but the best per artifact."""
    best: dict[str, tuple[Candidate, Judgement]] = {}
    for entry in passers:
        aid = entry[0].diff.artifact_id
        if aid not in best or _rank(entry) < _rank(best[aid]):
            best[aid] = entry
    verdicts: dict[str, tuple[Candidate, Decision]] = {}
    for candidate, post in passers:
        winner = best[candidate.diff.artifact_id][0]
        if best_only and winner is not candidate:
            decision = verdict(candidate, Outcome.DEFERRED, STAGE,
                               f"passes ({post.describe()}), but {winner.diff.id} is better this step and only one "
                               "change per artifact is committed per step; it will be rebased", post.numbers())
        else:
            decision = verdict(candidate, Outcome.ACCEPTED, STAGE, f"significant: {post.describe()}",
                               post.numbers())
        verdicts[candidate.diff.id] = (candidate, decision)
    return verdicts


def accept_if(*, delta: float | Schedule = 0.05, margin: float = 0.02, min_examples: int = 1,
              prior: tuple[float, float] = SIGN_TEST_PRIOR, best_only: bool = True, looks: int = 2,
              first_share: float = 0.7, promise: float = 0.8) -> Stage[AcceptanceState]:
    """The acceptance test as a stage named "accept".

    Args:
        delta: the risk δ in (0, 0.5), or a `Schedule` of it read at the artifact's head version.
        margin: the minimum improvement per differing pair, in [0, 1).
        min_examples: fewer paired examples than this is a rejection.
        prior: the Beta prior (a0, b0) of the win rate, 0 <= a0 <= b0 (default: the exact sign test).
        best_only: accept at most one diff per artifact per step; the other passers are DEFERRED.
        looks: the most looks a candidate's evidence gets (1: no extension).
        first_share: the share of δ the first look is tested at (the later ones share the rest).
        promise: a candidate that fails a look before its last, but whose confidence (1 − p-value) is at least
            this, with more wins than losses and no harm, is held for more tasks (in (1/2, 1)).
    Accepted candidates stay in the batch (the aggregator commits them); every other candidate is settled.
    State: `AcceptanceState`, per-artifact verdict counts.
    """
    schedule, margin, prior = delta_schedule(delta), check_margin(margin), check_prior(prior)
    integer(min_examples, "min_examples", low=0)
    check_looks(looks, first_share, promise)

    def promising(candidate: Candidate, post: Judgement, state: AcceptanceState) -> bool:
        return (candidate.looks < looks and not candidate.recheck and not post.harmful
                and not candidate.evidence.replicas and post.total.wins > post.total.losses
                and 1.0 - post.p_value >= promise and (candidate.origin is None or not state.is_spent(candidate)))

    def replicable(candidate: Candidate, post: Judgement, ctx: Context, risk: float,
                   pooled: tuple[list[Row], int] | None) -> bool:
        """Held (again) for the replication test (module doc), or the pooled one (`pooled`: its rows, and how many
        are new to its change since the proposal's test began)."""
        evidence = candidate.evidence
        if post.harmful or candidate.origin is None or candidate.shows_origin or candidate.closing:
            return False
        if pooled is not None:
            return may_go_on(pooled[0], own=pooled[1], alpha=post.delta, noise=ctx.noise)
        if evidence.replicas:
            return may_replicate(evidence, delta=risk, noise=ctx.noise)
        return candidate.looks < looks

    def update(batch: Batch, state: AcceptanceState, ctx: Context) -> tuple[Batch, AcceptanceState]:
        verdicts: dict[str, tuple[Candidate, Decision]] = {}
        passers: list[tuple[Candidate, Judgement]] = []
        tried_of: dict[str, int] = {}
        for candidate in batch.candidates:
            head, tried = head_of(ctx, candidate.diff.artifact_id), state.tried(candidate.evidence)
            tried_of[candidate.diff.id] = tried
            risk = look_delta(schedule(head.version), candidate.looks, looks=looks, first_share=first_share)
            risk /= 1 + tried  # the replication test's level, spent over the candidates that failed it (module doc)
            post = judge(candidate.evidence, delta=risk, margin=margin, noise=ctx.noise, prior=prior,
                         closing=candidate.closing)
            post, pooled, state = _pooled_look(state, candidate, post, risk, ctx)
            decision = _judge(candidate, post, head, min_examples, promising(candidate, post, state))
            if decision is None:
                passers.append((candidate, post))
            elif decision.outcome is Outcome.REJECTED and head.layer is not Layer.L0 \
                    and replicable(candidate, post, ctx, risk, pooled):
                held = _replicating(candidate, post, state.is_spent(candidate))
                verdicts[candidate.diff.id] = (replace(candidate, replicate=True), _shared(held, tried))
            else:
                if decision.outcome is Outcome.REJECTED and candidate.evidence.replicas:
                    state = state.failed_replication(candidate.evidence)
                    decision = _favoured(decision, candidate.evidence, ctx)
                verdicts[candidate.diff.id] = (candidate, _shared(decision, tried))
                state = state.spent_after(candidate, post, decision)
        verdicts.update({key: (c, _shared(d, tried_of[key])) for key, (c, d) in _pick(passers, best_only).items()})
        ordered = {c.diff.id: verdicts[c.diff.id] for c in batch.candidates}
        keep = [c for c, d in ordered.values() if d.outcome is Outcome.ACCEPTED]
        if keep:  # a discovery earns the level back (module doc)
            state = replace(state, since_accepted=0)
        return batch.settle(ordered, keep=keep), state.counted([d for _, d in ordered.values()])

    return Stage(STAGE, AcceptanceState, update, AcceptanceState.load)
