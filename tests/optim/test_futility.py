"""Futility: an upper bound on the chance that a candidate still passes once every remaining task is scored."""

from __future__ import annotations

import itertools

import pytest
from scipy.stats import betabinom

from agentgrad.optim.futility import PassThresholds, prob_pass_later
from agentgrad.optim.stats import prob_improvement

TEST = PassThresholds(delta=0.05, margin=0.02)


def test_thresholds_are_the_least_wins_that_pass() -> None:
    for losses in range(6):
        need = TEST.need(losses)
        assert prob_improvement(need, losses, margin=0.02) > 0.95
        assert need == 0 or prob_improvement(need - 1, losses, margin=0.02) <= 0.95
    assert [TEST.need(x) for x in range(6)] == sorted(TEST.need(x) for x in range(6))


@pytest.mark.parametrize(("wins", "losses", "differing", "scored", "remaining"),
                         [(0, 0, 0, 20, 60), (3, 0, 3, 20, 60), (2, 1, 3, 30, 10), (5, 0, 5, 40, 40)])
def test_the_bound_is_the_chance_that_enough_tasks_differ(wins: int, losses: int, differing: int, scored: int,
                                                          remaining: int) -> None:
    short = TEST.need(losses) - wins
    expected = sum(betabinom.pmf(k, remaining, differing + 1, scored - differing + 1)
                   for k in range(max(0, short), remaining + 1))
    assert prob_pass_later(wins, losses, differing, scored, remaining, TEST) == pytest.approx(expected, abs=1e-9)


def test_the_bound_holds_against_every_completion_of_a_small_case() -> None:
    # With the differing share fixed at its posterior draw, no way of scoring the rest can pass more often than
    # the bound says: check against exact enumeration with every remaining differing task a win (the best case).
    for wins, losses, remaining in itertools.product(range(4), range(3), range(1, 6)):
        scored = wins + losses + 4
        bound = prob_pass_later(wins, losses, wins + losses, scored, remaining, TEST)
        best = sum(betabinom.pmf(k, remaining, wins + losses + 1, scored - wins - losses + 1)
                   for k in range(remaining + 1)
                   if prob_improvement(wins + k, losses, margin=0.02) > 0.95)
        assert bound == pytest.approx(best, abs=1e-9)


def test_a_candidate_that_changes_nothing_becomes_futile_and_a_promising_one_does_not() -> None:
    assert prob_pass_later(0, 0, 0, 50, 40, TEST) < 0.02  # nothing differed in more than half the split
    assert prob_pass_later(0, 0, 0, 4, 76, TEST) > 0.3  # too early to tell
    assert prob_pass_later(4, 0, 4, 30, 50, TEST) > 0.5  # on its way


def test_a_passing_record_is_certain_and_an_unreachable_one_is_impossible() -> None:
    assert prob_pass_later(TEST.need(0), 0, TEST.need(0), 20, 10, TEST) == 1.0
    assert prob_pass_later(0, 0, 0, 70, TEST.need(0) - 1, TEST) == 0.0
