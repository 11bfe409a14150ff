"""The significance test behind acceptance and fusion: an exact Beta posterior, no sampling.

Paired evidence gives fractional wins `w` and losses `l` (the sums of the positive and negative parts of the
per-example deltas). Let θ = P(candidate beats base | the pair differs), with posterior Beta(a0 + w, b0 + l).
The expected improvement on a differing pair is 2θ − 1, so P(improvement > margin) = P(θ > (1 + margin) / 2),
which is one call to the regularized incomplete beta function: deterministic and microseconds.

The default "prior" is `SIGN_TEST_PRIOR` = (0, 1), the limit of Beta priors under which the rule *is* the exact
one-sided sign test: with k wins and l losses (integers), P(θ > t) under Beta(k, l + 1) equals 1 − P(Bin(k + l, t)
≥ k), one minus the sign test's p-value against θ = t. So under the null (θ = (1 + margin) / 2 or below) the
false-accept rate never exceeds δ, and no valid non-randomised test on the same evidence has more power. With no
win at all the probability is 0. `SKEPTICAL_PRIOR` = (1, 2) is stricter (one win more at small n); a flat prior
(1, 1) is a little more eager than the sign test: its false-accept rate can exceed δ by up to half a binomial pmf at
small n (see `false_accept_rate`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import betainc
from scipy.stats import binom

from agentgrad.core._checks import integer, is_number, number
from agentgrad.core.evidence import Evidence
from agentgrad.errors import ConfigError, InvalidEvidenceError

FLAT_PRIOR: tuple[float, float] = (1.0, 1.0)
SKEPTICAL_PRIOR: tuple[float, float] = (1.0, 2.0)
SIGN_TEST_PRIOR: tuple[float, float] = (0.0, 1.0)


def check_margin(margin: float) -> float:
    """Return `margin` if it is a number in [0, 1), else raise `ValueError`."""
    return number(margin, "margin", low=0.0, below=1.0)


def check_delta(delta: float) -> float:
    """Return `delta` if it is a number in (0, 0.5), else raise `ValueError` (δ ≥ 0.5 could accept a tie)."""
    return number(delta, "delta", above=0.0, below=0.5)


def check_prior(prior: tuple[float, float]) -> tuple[float, float]:
    """Return `prior` if it is two finite numbers (a0, b0) with 0 <= a0 <= b0 and b0 > 0, else raise `ValueError`.

    a0 <= b0 means the prior never favours the candidate, which is what keeps a tie at P <= 1/2; a0 = 0 is the
    sign-test limit (`SIGN_TEST_PRIOR`).
    """
    try:
        a0, b0 = (float(x) for x in prior)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"prior must be a pair of numbers (a0, b0), got {prior!r}") from exc
    if not (is_number(a0, low=0.0) and is_number(b0, above=0.0)):
        raise ConfigError(f"prior (a0, b0) must be finite, a0 >= 0 and b0 > 0, got {prior!r}")
    if a0 > b0:
        raise ConfigError(f"prior (a0, b0) = {prior!r} favours the candidate (a0 > b0); a tie could be accepted")
    return a0, b0


def prob_improvement(wins: float, losses: float, *, margin: float,
                     prior: tuple[float, float] = SIGN_TEST_PRIOR) -> float:
    """P(2θ − 1 > margin) under the posterior Beta(a0 + wins, b0 + losses) (0 when a0 + wins is 0).

    Args:
        wins, losses: fractional win and loss totals, finite and >= 0.
        margin: the smallest improvement per differing pair that counts, in [0, 1).
        prior: (a0, b0), finite, 0 <= a0 <= b0, b0 > 0.
    An exact tie (wins == losses) gives at most 1/2, so a rule with δ < 1/2 never accepts it.

    >>> round(prob_improvement(5, 0, margin=0.0), 4)
    0.9688
    """
    a0, b0 = check_prior(prior)
    a = a0 + number(wins, "wins", low=0.0, error=InvalidEvidenceError)
    b = b0 + number(losses, "losses", low=0.0, error=InvalidEvidenceError)
    if a <= 0:
        return 0.0
    # P(θ > t) = I_{1−t}(b, a), with 1 − t = (1 − margin) / 2 computed without cancellation.
    p = float(betainc(b, a, (1.0 - check_margin(margin)) / 2.0))
    if a <= b:
        # Beta(a, b) with a <= b has its median at or below 1/2 <= t: clamp away round-off above 1/2.
        p = min(p, 0.5)
    return min(max(p, 0.0), 1.0)


def false_accept_rate(n: int, *, delta: float, margin: float,
                      prior: tuple[float, float] = SIGN_TEST_PRIOR) -> float:
    """The exact probability that the rule `prob_improvement > 1 − δ` accepts under the null.

    The null: each of `n` differing binary pairs is a win with probability 1/2, so the wins are Binom(n, 1/2).
    Returns the sum over k of Binom(n, 1/2).pmf(k) for the k the rule accepts.
    """
    integer(n, "n", low=0)
    threshold = 1.0 - check_delta(delta)
    accepted = [k for k in range(n + 1) if prob_improvement(k, n - k, margin=margin, prior=prior) > threshold]
    return float(np.sum(binom.pmf(np.asarray(accepted, dtype=np.int64), n, 0.5)))


@dataclass(frozen=True)
class Posterior:
    """The figures behind one significance verdict.

    Args:
        wins, losses: fractional totals of the positive and negative deltas.
        n: number of paired examples.
        p: P(improvement > margin).
        mean_delta: mean per-example improvement.
        delta, margin: the test's risk and minimum effect.
    """

    wins: float
    losses: float
    n: int
    p: float
    mean_delta: float
    delta: float
    margin: float

    @property
    def threshold(self) -> float:
        """The level `p` must exceed: 1 − δ."""
        return 1.0 - self.delta

    @property
    def passes(self) -> bool:
        """True when the improvement is significant: p > 1 − δ."""
        return self.p > self.threshold

    def numbers(self) -> dict[str, float]:
        """The figures as a decision's `numbers`."""
        return {"wins": self.wins, "losses": self.losses, "n": float(self.n), "p": self.p,
                "mean_delta": self.mean_delta, "delta": self.delta, "margin": self.margin,
                "threshold": self.threshold}

    def describe(self) -> str:
        """One readable sentence, e.g. 'P(gain > 0.02) = 0.9824 vs > 0.9500 needed (5 wins, 0 losses, n=5)'."""
        return (f"P(gain > {self.margin:g}) = {self.p:.4f} vs > {self.threshold:.4f} needed "
                f"({self.wins:.4g} wins, {self.losses:.4g} losses, n={self.n})")


def posterior_summary(evidence: Evidence, *, delta: float, margin: float,
                      prior: tuple[float, float] = SIGN_TEST_PRIOR) -> Posterior:
    """Test `evidence` at risk `delta` and minimum effect `margin`; see `prob_improvement`."""
    wins, losses = evidence.wins_losses()
    p = prob_improvement(wins, losses, margin=margin, prior=prior)
    return Posterior(wins, losses, len(evidence.rows), p, evidence.mean_delta(), check_delta(delta), float(margin))
