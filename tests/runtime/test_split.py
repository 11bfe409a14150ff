"""The explore/judge split of one call budget: priors, the judging reserve and when a rollout may start."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgrad import Budget, Workers, evolve
from agentgrad.core.diff import Diff
from agentgrad.core.evidence import Evidence, Row
from agentgrad.optim.base import Candidate
from agentgrad.optim.judge import EXTRA_REPLICAS, REPLICAS
from agentgrad.runtime.split import (
    PRIOR_WEIGHT,
    SplitFigures,
    judging_reserve,
    may_explore,
    replication_cost,
    replication_reserve,
    triage,
)
from agentgrad.testing import drawn
from agentgrad.testing.agents import WorldAgent
from agentgrad.testing.world import ReferenceWorld


def figures(rollouts: int = 0, proposals: int = 0, judged: int = 0, gate_calls: float = 0.0,
            prior_cost: float = 10.0) -> SplitFigures:
    return SplitFigures(rollouts=rollouts, proposals=proposals, judged=judged, gate_calls=gate_calls,
                        prior_cost=prior_cost)


def test_before_anything_is_measured_every_rollout_proposes_at_the_prior_cost() -> None:
    start = figures(prior_cost=12.0)
    assert start.yield_per_rollout == 1.0
    assert start.cost_per_proposal == 12.0


def test_the_priors_count_as_two_observations() -> None:
    assert PRIOR_WEIGHT == 2.0
    seen = figures(rollouts=8, proposals=2, judged=3, gate_calls=30.0, prior_cost=10.0)
    assert seen.yield_per_rollout == pytest.approx((2 + 2) / (8 + 2))
    assert seen.cost_per_proposal == pytest.approx((30 + 2 * 10) / (3 + 2))


def test_measured_figures_outweigh_the_priors_as_they_grow() -> None:
    seen = figures(rollouts=1000, proposals=100, judged=100, gate_calls=300.0, prior_cost=50.0)
    assert seen.yield_per_rollout == pytest.approx(102 / 1002)  # near the measured 0.1, far from the prior 1
    assert seen.cost_per_proposal == pytest.approx(400 / 102)  # near the measured 3, far from the prior 50


def test_the_reserve_prices_waiting_and_expected_proposals_at_the_cost_per_proposal() -> None:
    seen = figures(rollouts=8, proposals=2, judged=3, gate_calls=30.0, prior_cost=10.0)  # yield 0.4, cost 10
    assert judging_reserve(seen, waiting=3, exploring=5) == pytest.approx(10.0 * (3 + 0.4 * 5))
    assert judging_reserve(seen, waiting=0, exploring=0) == 0.0


def test_a_rollout_is_refused_while_the_reserve_is_larger_than_the_calls_left() -> None:
    start = figures(prior_cost=10.0)
    # three proposals waiting and the new rollout's own: 4 x 10 calls kept for judging, 29 free after it
    assert judging_reserve(start, waiting=3, exploring=1) == 40.0
    assert not may_explore(start, calls_left=30, waiting=3, exploring=0)


def test_a_rollout_is_allowed_once_verdicts_free_calls() -> None:
    start = figures(prior_cost=10.0)
    assert not may_explore(start, calls_left=30, waiting=3, exploring=0)
    assert not may_explore(start, calls_left=30, waiting=2, exploring=0)  # reserve 30 > 29
    assert may_explore(start, calls_left=30, waiting=1, exploring=0)  # reserve 20 <= 29


def test_a_cheaper_measured_cost_lets_rollouts_start_again() -> None:
    pricey, cheap = figures(prior_cost=10.0), figures(judged=20, gate_calls=40.0, prior_cost=10.0)
    assert not may_explore(pricey, calls_left=30, waiting=3, exploring=0)
    assert may_explore(cheap, calls_left=30, waiting=3, exploring=0)  # cost (40 + 20) / 22 ≈ 2.7


def test_rollouts_in_flight_count_toward_the_reserve() -> None:
    start = figures(prior_cost=10.0)
    assert may_explore(start, calls_left=30, waiting=0, exploring=1)  # 2 x 10 <= 29
    assert not may_explore(start, calls_left=30, waiting=0, exploring=2)  # 3 x 10 > 29


def test_the_calls_left_may_exactly_cover_the_rollout_and_the_reserve() -> None:
    start = figures(prior_cost=10.0)
    assert may_explore(start, calls_left=21, waiting=1, exploring=0)  # 21 - 1 == 20
    assert not may_explore(start, calls_left=20.5, waiting=1, exploring=0)


@pytest.mark.parametrize("calls_left", [1, 1.0, 1.5, 7])
def test_with_nothing_waiting_or_in_flight_a_rollout_may_start_while_a_call_is_left(calls_left: float) -> None:
    assert may_explore(figures(prior_cost=1e9), calls_left=calls_left, waiting=0, exploring=0)


@pytest.mark.parametrize("calls_left", [0.999, 0, -3])
@pytest.mark.parametrize("waiting, exploring", [(0, 0), (1, 0), (0, 1)])
def test_no_rollout_starts_with_less_than_one_call_left(calls_left: float, waiting: int, exploring: int) -> None:
    assert not may_explore(figures(prior_cost=0.0), calls_left=calls_left, waiting=waiting, exploring=exploring)


def test_free_judging_leaves_only_the_rollouts_own_call_to_cover() -> None:
    free = figures(prior_cost=0.0)
    assert may_explore(free, calls_left=1, waiting=50, exploring=50)


counts = st.integers(min_value=0, max_value=200)
split_figures = st.builds(SplitFigures, rollouts=counts, proposals=counts, judged=counts,
                          gate_calls=st.floats(min_value=0, max_value=5000), prior_cost=st.floats(0, 100))
calls = st.floats(min_value=-2, max_value=2000)


@settings(max_examples=300, deadline=None)
@given(split_figures, calls, calls, counts, counts)
def test_may_explore_is_monotone_in_the_calls_left(fig: SplitFigures, a: float, b: float, waiting: int,
                                                   exploring: int) -> None:
    fewer, more = sorted((a, b))
    if may_explore(fig, calls_left=fewer, waiting=waiting, exploring=exploring):
        assert may_explore(fig, calls_left=more, waiting=waiting, exploring=exploring)


@settings(max_examples=300, deadline=None)
@given(split_figures, calls, counts, counts, counts)
def test_may_explore_is_antitone_in_the_proposals_waiting(fig: SplitFigures, calls_left: float, a: int, b: int,
                                                          exploring: int) -> None:
    fewer, more = sorted((a, b))
    if may_explore(fig, calls_left=calls_left, waiting=more, exploring=exploring):
        assert may_explore(fig, calls_left=calls_left, waiting=fewer, exploring=exploring)


@settings(max_examples=300, deadline=None)
@given(split_figures, calls, counts, counts, counts)
def test_may_explore_is_antitone_in_the_rollouts_in_flight(fig: SplitFigures, calls_left: float, waiting: int,
                                                           a: int, b: int) -> None:
    fewer, more = sorted((a, b))
    if may_explore(fig, calls_left=calls_left, waiting=waiting, exploring=more):
        assert may_explore(fig, calls_left=calls_left, waiting=waiting, exploring=fewer)


def test_the_replication_reserve_is_two_calls_for_each_context_a_parked_candidate_lacks() -> None:
    assert REPLICAS == 5
    assert replication_reserve([]) == 0.0
    assert replication_reserve([0, 3, 5, 7]) == 2 * 5 + 2 * 2 + 2 * 3 + 2 * 1  # past five: the second stage's 3
    assert replication_reserve([REPLICAS + EXTRA_REPLICAS, 9]) == 0.0
    assert replication_reserve([], out=[0, 3]) == 2 * 4 + 2 * 1  # the context it is out for is paid as a proposal


def test_the_calls_parked_candidates_may_need_are_kept_even_with_nothing_else_in_flight() -> None:
    start = figures(prior_cost=10.0)
    assert may_explore(start, calls_left=11, waiting=0, exploring=0, parked=0.0)
    assert not may_explore(start, calls_left=10, waiting=0, exploring=0, parked=10.0)  # 9 < 10 + 10
    assert may_explore(start, calls_left=21, waiting=0, exploring=0, parked=10.0)  # 10 + one rollout's 10
    assert not may_explore(start, calls_left=30, waiting=1, exploring=0, parked=10.0)  # 10 + 2 x 10 > 29


def held(name: str, contexts: int) -> Candidate:
    marks = tuple(f"t1@{name}{k}" for k in range(contexts))
    evidence = Evidence(tuple(Row(m, 0.0, 1.0) for m in marks), base_version=0, replicas=marks)
    return Candidate(Diff("skills/s", 0, (), id=name), evidence, origin="t1", replicate=True)


def test_a_held_candidate_costs_two_calls_a_context_it_may_still_need() -> None:
    assert [replication_cost(n) for n in (0, 3, REPLICAS, REPLICAS + 1, REPLICAS + EXTRA_REPLICAS)] == \
        [2 * REPLICAS, 2 * (REPLICAS - 3), 2 * EXTRA_REPLICAS, 2 * (EXTRA_REPLICAS - 1), 0]


def test_with_calls_for_every_held_candidate_triage_releases_them_all_in_order() -> None:
    ready = [held("a", 1), held("b", 3)]
    assert triage(ready, afford=2 * REPLICAS + 2 * (REPLICAS - 1) + 2 * (REPLICAS - 3),
                  need=lambda c: 1) == (ready, [])
    assert triage(ready, afford=10_000.0, need=lambda c: None) == (ready, [])


def test_short_of_calls_the_candidates_nearest_a_pass_go_first_as_many_as_the_calls_cover() -> None:
    ready = [held("a", 1), held("b", 3), held("c", 2), held("d", 0)]
    need = {"a": 4, "b": 1, "c": 2, "d": None}
    now, later = triage(ready, afford=7.0, need=lambda c: need[c.diff.id])
    assert [c.diff.id for c in now] == ["b", "c"]  # 2 + 4 calls; a's 8 more do not fit; in the order they came
    assert [c.diff.id for c in later] == ["a", "d"]
    now, later = triage(ready, afford=1.0, need=lambda c: need[c.diff.id])
    assert [c.diff.id for c in now] == ["b"] and len(later) == 3  # at least one, however few the calls


def test_a_short_run_with_more_held_candidates_than_calls_finishes_the_nearest(tmp_path: Path) -> None:
    """88 calls, 16 workers, a world of rare categories (one or two tasks each): the first round's proposals hold
    four right rules to replicate, and spread over all four the calls ended with none decided."""
    config = drawn.drawn(1, 4242)
    world = ReferenceWorld(replace(config, seed=config.seed))
    agent = WorldAgent(world, median=0.0, sigma=0.0)
    result = evolve(agent.splits(), agent.reward, agent=agent, strategy=world.strategy, artifact=world.artifact,
                    budget=Budget(calls=88), workers=Workers(rollout=16, propose=16, gate=16, slots=16),
                    store=tmp_path / "run", seed=0)
    assert result.ok, result.error
    assert result.usage.rollouts + result.usage.gate_evals <= 88
    audit = world.audit(result.artifact.text)
    assert audit["right"] >= 2 and audit["wrong"] == audit["junk"] == 0


def test_a_candidate_held_for_more_evidence_counts_as_judged_once_at_its_final_verdict(tmp_path: Path) -> None:
    """The split prices a proposal at the gate calls per judged proposal: counting each hold of a replicating
    candidate as a verdict priced them at a fraction of their cost (104 calls, 16 workers, a world of rare
    categories: 15 judged of 6 proposals, 5.4 calls each, and rollouts late in the run took the calls two
    candidates one context from a pass needed)."""
    world = ReferenceWorld(drawn.drawn(9, 4242))
    agent = WorldAgent(world, median=0.0, sigma=0.0)
    holds: list[str] = []

    def listen(kind: str, payload: Mapping[str, Any]) -> None:
        if kind == "decision" and payload["outcome"] == "extend":
            holds.append(str(payload["diff_id"]))
    result = evolve(agent.splits(), agent.reward, agent=agent, strategy=world.strategy, artifact=world.artifact,
                    budget=Budget(calls=104), workers=Workers(rollout=16, propose=16, gate=16, slots=16),
                    store=tmp_path / "run", seed=0, callbacks=[listen])
    assert result.ok, result.error
    assert len(holds) >= 5  # candidates held for more evidence, several times each
    assert 0 < result.counts["judged"] <= result.counts["proposals"]
