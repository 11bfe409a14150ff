"""How one budget of calls (`Budget.calls`) is divided between exploring and judging.

Rollouts explore: each may end in a proposal. The gate judges: every proposal costs calls before it has a verdict.
Spending the calls on rollouts whose proposals can never be judged learns nothing; so can leaving calls unused
because rollouts stopped too early. The split is decided afresh before every rollout from what the run has
measured so far: a rollout may start only while the calls left cover it plus the expected judging cost of the
work already in the pipeline (the proposals waiting for a verdict, and those the rollouts in flight are expected to
bring), each proposal priced at the mean gate calls a proposal has cost so far, and the calls the candidates held
to replicate (`runtime.parking`) may still need, two per fresh context they lack (for one out for a context now,
priced as a proposal for that one, the contexts after it); and when the calls left cannot finish every held
candidate, the ones nearest a pass go first (`triage`). Early in a run the estimates are
the priors below, blended with what was measured as evidence comes in.

Pure: the figures come in as arguments, nothing is read from a clock or a store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from agentgrad.optim.base import Candidate
from agentgrad.optim.judge import EXTRA_REPLICAS, REPLICAS

PRIOR_WEIGHT = 2.0  # the priors count as this many observations


@dataclass(frozen=True)
class SplitFigures:
    """What the run has bought so far.

    Args:
        rollouts: rollouts finished.
        proposals: proposals that reached the gate.
        judged: proposals with a final verdict (screened out, rejected, accepted, ...).
        gate_calls: calls of `run` the gate made for them.
        prior_cost: the gate calls one proposal is expected to cost before any was judged.
    """

    rollouts: int
    proposals: int
    judged: int
    gate_calls: float
    prior_cost: float

    @property
    def yield_per_rollout(self) -> float:
        """Proposals per rollout (prior: every rollout proposes, as every task fails at the start)."""
        return (self.proposals + PRIOR_WEIGHT) / (self.rollouts + PRIOR_WEIGHT)

    @property
    def cost_per_proposal(self) -> float:
        """Gate calls per judged proposal."""
        return (self.gate_calls + PRIOR_WEIGHT * self.prior_cost) / (self.judged + PRIOR_WEIGHT)


def judging_reserve(figures: SplitFigures, *, waiting: int, exploring: int) -> float:
    """The calls to keep for judging: `waiting` proposals without a verdict and the proposals `exploring`
    rollouts in flight are expected to bring, at the measured cost per proposal."""
    expected = waiting + figures.yield_per_rollout * exploring
    return figures.cost_per_proposal * expected


def replication_reserve(replicas: Iterable[int], *, out: Iterable[int] = ()) -> float:
    """The most calls candidates held to replicate still need, given the replicas each has: two a context (the
    origin task with and without the change) up to the design's `REPLICAS`, or, for one held past them (its second
    stage), up to `REPLICAS` + `EXTRA_REPLICAS`. `out` gives the replicas of candidates out for a context now: that
    context is paid for as a proposal, so only the contexts after it are kept (as for one with a replica more)."""
    counts = [*replicas, *(n + 1 for n in out)]
    return float(sum(replication_cost(n) for n in counts))


def replication_cost(replicas: int) -> int:
    """The most calls a candidate held to replicate with `replicas` contexts still needs: two a context (the origin
    task with and without the change) up to the design's `REPLICAS`, or past them up to `REPLICAS` +
    `EXTRA_REPLICAS`."""
    return 2 * max(0, (REPLICAS if replicas < REPLICAS else REPLICAS + EXTRA_REPLICAS) - replicas)


def may_explore(figures: SplitFigures, *, calls_left: float, waiting: int, exploring: int,
                parked: float = 0.0) -> bool:
    """True if one more rollout fits beside the judging reserve (it counts itself among the `exploring`) and the
    `parked` calls the replicating candidates may still need. With nothing waiting, nothing in flight and nothing
    parked, a rollout always may start while a call is left: only rollouts can bring more work, so holding them
    back would leave the calls unused."""
    if calls_left < 1:
        return False
    if waiting == 0 and exploring == 0 and parked <= 0:
        return True
    return calls_left - 1 >= parked + judging_reserve(figures, waiting=waiting, exploring=exploring + 1)


def triage(ready: list[Candidate], *, afford: float, need: Callable[[Candidate], int | None]
           ) -> tuple[list[Candidate], list[Candidate]]:
    """(the held candidates to replicate now, those left waiting), of `ready` (in order), when the calls left,
    `afford`, cannot take every one to the end of its design (`replication_cost`): the ones nearest a pass first
    (`need`: the fewest more contexts, all won, that pass it, `optim.judge.contexts_to_pass`; None: none), as many
    as the calls cover at two a context (all of its design's for one with no pass left), and at least one. Holding
    a candidate back can only make it less likely to pass, so the test keeps its bound; spread over all of them, the
    calls of a short run ended with none decided (four right rules held at three contexts each)."""
    if sum(replication_cost(len(c.evidence.replicas)) for c in ready) <= afford:
        return ready, []
    most = REPLICAS + EXTRA_REPLICAS + 1  # ranks a candidate with no pass left after every other
    needs = {c.diff.id: (most, replication_cost(len(c.evidence.replicas))) if (n := need(c)) is None else (n, 2 * n)
             for c in ready}  # (contexts to a pass, calls they cost)
    taken, spent = set[str](), 0
    for candidate in sorted(ready, key=lambda c: needs[c.diff.id][0]):
        cost = needs[candidate.diff.id][1]
        if not taken or spent + cost <= afford:
            taken.add(candidate.diff.id)
            spent += cost
    return [c for c in ready if c.diff.id in taken], [c for c in ready if c.diff.id not in taken]
