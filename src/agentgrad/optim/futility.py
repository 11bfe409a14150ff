"""Futility: a bound on the probability that a candidate still passes the acceptance test once every remaining
validation task is scored.

The gate stops early in two ways. Exact curtailment (`runtime.gate.verdict_is_certain`) stops only when no
outcome of the remaining tasks could change the verdict; it never changes one, but a candidate that makes no
difference is then scored on nearly the whole split before it is rejected. Futility stops such a candidate once
passing has become improbable even in the best case. With `d` of the `n` tasks scored so far differing, each of
the `m` remaining tasks differs with probability r ~ Beta(d + 1, n − d + 1), so the number D that will differ is
beta-binomial. The best case is that every one of them is a win and none a loss; the test can then pass only if
w + D reaches the least number of wins that passes with the l losses already seen. So P(D >= need(l) − w) bounds
the probability of passing from above, whatever the win share of the differing tasks turns out to be.

Futility only ever turns a possible accept into a reject, so the false-accept bound of the acceptance test holds;
the price is power: a helpful candidate whose first tasks happen to show almost nothing can be stopped, with
probability below the futility threshold.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import betaln, gammaln

from agentgrad.optim.stats import SIGN_TEST_PRIOR, check_delta, check_margin, check_prior, prob_improvement


class PassThresholds:
    """The least number of wins that passes `prob_improvement > 1 − delta` for each number of losses (integers),
    computed on demand and remembered.

    Args:
        delta, margin, prior: the acceptance test's parameters.
    State: the thresholds found so far (non-decreasing in the losses).
    """

    def __init__(self, *, delta: float, margin: float, prior: tuple[float, float] = SIGN_TEST_PRIOR) -> None:
        self.delta, self.margin, self.prior = check_delta(delta), check_margin(margin), check_prior(prior)
        self._need: list[int] = []

    def passes(self, wins: float, losses: float) -> bool:
        return prob_improvement(wins, losses, margin=self.margin, prior=self.prior) > 1 - self.delta

    def need(self, losses: int) -> int:
        """The least integer number of wins that passes with `losses` losses."""
        while len(self._need) <= losses:
            count = len(self._need)
            wins = self._need[-1] if self._need else 0
            while not self.passes(wins, count):
                wins += 1
            self._need.append(wins)
        return self._need[losses]


def _log_beta_binomial(k: np.ndarray, n: int, a: float, b: float) -> np.ndarray:
    """log P(K = k) for K ~ BetaBinomial(n, a, b), k in 0..n."""
    return (gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)
            + betaln(k + a, n - k + b) - betaln(a, b))


def prob_pass_later(wins: float, losses: float, differing: int, scored: int, remaining: int,
                    thresholds: PassThresholds) -> float:
    """An upper bound on the probability that the test passes once `remaining` more tasks are scored.

    Args:
        wins, losses: the win and loss totals so far (fractional totals are rounded in the candidate's favour:
            wins up, losses down).
        differing: how many of the `scored` tasks had a non-zero difference.
        scored, remaining: tasks scored so far and still to score.
        thresholds: the test (`PassThresholds`).
    """
    short = thresholds.need(math.floor(losses + 1e-9)) - math.ceil(wins - 1e-9)  # wins still missing
    if short <= 0:
        return 1.0
    if short > remaining:
        return 0.0
    k = np.arange(short, remaining + 1, dtype=float)
    return float(np.exp(_log_beta_binomial(k, remaining, differing + 1.0, scored - differing + 1.0)).sum())
