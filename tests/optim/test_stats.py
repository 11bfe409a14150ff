"""The exact Beta-posterior test: ties, monotonicity, a slow reference, and the false-accept rate under the null."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.integrate import quad
from scipy.stats import binom

from agentgrad.core.evidence import Evidence, Row
from agentgrad.errors import InvalidEvidenceError
from agentgrad.optim.stats import (
    FLAT_PRIOR,
    SKEPTICAL_PRIOR,
    false_accept_rate,
    posterior_summary,
    prob_improvement,
)

LAWS = settings(derandomize=True, max_examples=200, deadline=None)
counts = st.floats(min_value=0.0, max_value=1e6, allow_nan=False, allow_infinity=False)
margins = st.floats(min_value=0.0, max_value=0.99)
priors = st.tuples(st.floats(0.05, 20.0), st.floats(0.0, 20.0)).map(lambda p: (p[0], p[0] + p[1]))


def reference(wins: float, losses: float, margin: float, prior: tuple[float, float]) -> float:
    """P(θ > (1 + margin) / 2) by integrating the Beta density numerically (independent of betainc)."""
    a, b = prior[0] + wins, prior[1] + losses
    log_norm = math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)

    def power(exponent: float, log_base: float) -> float:
        return 0.0 if exponent == 0 else exponent * log_base

    def density(x: float) -> float:
        log_x = math.log(x) if x > 0 else -math.inf
        log_1mx = math.log1p(-x) if x < 1 else -math.inf
        return math.exp(power(a - 1, log_x) + power(b - 1, log_1mx) - log_norm)

    lower = (1 + margin) / 2
    mode = min(max((a - 1) / (a + b - 2), lower), 1.0) if a + b > 2 else lower
    points = [mode] if lower < mode < 1 else None
    value, _ = quad(density, lower, 1.0, points=points, epsabs=1e-12, epsrel=1e-11, limit=200)
    return value


@LAWS
@given(w=counts, margin=margins, prior=priors)
def test_exact_tie_never_exceeds_one_half(w: float, margin: float, prior: tuple[float, float]) -> None:
    assert prob_improvement(w, w, margin=margin, prior=prior) <= 0.5


@pytest.mark.parametrize("w", [0.0, 0.3, 1.0, 7.5, 1e3, 1e6])
def test_exact_tie_at_zero_margin_is_at_most_one_half_despite_round_off(w: float) -> None:
    assert prob_improvement(w, w, margin=0.0) <= 0.5


@LAWS
@given(w=counts, losses=counts, extra=st.floats(0.0, 1e3), margin=margins)
def test_more_wins_never_lower_the_probability(w: float, losses: float, extra: float, margin: float) -> None:
    assert prob_improvement(w + extra, losses, margin=margin) >= prob_improvement(w, losses, margin=margin)


@LAWS
@given(w=counts, losses=counts, extra=st.floats(0.0, 1e3), margin=margins)
def test_more_losses_never_raise_the_probability(w: float, losses: float, extra: float, margin: float) -> None:
    assert prob_improvement(w, losses + extra, margin=margin) <= prob_improvement(w, losses, margin=margin)


@settings(derandomize=True, max_examples=120, deadline=None)
@given(w=st.floats(0.0, 40.0), losses=st.floats(0.0, 40.0), margin=st.floats(0.0, 0.9),
       prior=st.sampled_from([FLAT_PRIOR, SKEPTICAL_PRIOR, (0.5, 0.5), (2.0, 3.5)]))
def test_matches_numerical_integration_of_the_beta_density(w: float, losses: float, margin: float,
                                                           prior: tuple[float, float]) -> None:
    exact = prob_improvement(w, losses, margin=margin, prior=prior)
    expected = reference(w, losses, margin, prior)
    assert exact == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize("delta", [0.01, 0.05, 0.2, 0.45])
@pytest.mark.parametrize("margin", [0.0, 0.02, 0.1])
def test_skeptical_prior_false_accept_rate_never_exceeds_delta(delta: float, margin: float) -> None:
    rates = [false_accept_rate(n, delta=delta, margin=margin, prior=SKEPTICAL_PRIOR) for n in range(0, 121)]
    assert max(rates) <= delta


@pytest.mark.parametrize("delta", [0.01, 0.05, 0.2])
@pytest.mark.parametrize("margin", [0.0, 0.02])
def test_flat_prior_false_accept_rate_exceeds_delta_by_at_most_half_the_largest_pmf(delta: float,
                                                                                  margin: float) -> None:
    for n in range(0, 121):
        slack = 0.5 * float(binom.pmf(n // 2, n, 0.5))
        assert false_accept_rate(n, delta=delta, margin=margin) <= delta + slack


def test_flat_prior_false_accept_rate_is_at_most_delta_for_larger_samples_with_a_margin() -> None:
    assert all(false_accept_rate(n, delta=0.05, margin=0.02) <= 0.05 for n in range(50, 301, 10))


def _simulated_accept_rate(n: int, *, delta: float, margin: float, prior: tuple[float, float],
                           trials: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    wins = rng.integers(0, 2, size=(trials, n)).sum(axis=1)
    cache: dict[int, bool] = {}
    accepted = 0
    for k in wins.tolist():
        if k not in cache:
            cache[k] = prob_improvement(k, n - k, margin=margin, prior=prior) > 1 - delta
        accepted += cache[k]
    return accepted / trials


@pytest.mark.parametrize(("n", "delta", "margin", "prior"), [
    (12, 0.05, 0.0, FLAT_PRIOR),
    (30, 0.1, 0.02, FLAT_PRIOR),
    (25, 0.2, 0.0, SKEPTICAL_PRIOR),
])
def test_simulated_null_accept_rate_matches_the_exact_rate(n: int, delta: float, margin: float,
                                                           prior: tuple[float, float]) -> None:
    trials = 20_000
    exact = false_accept_rate(n, delta=delta, margin=margin, prior=prior)
    assert exact > 0  # otherwise the comparison proves nothing
    simulated = _simulated_accept_rate(n, delta=delta, margin=margin, prior=prior, trials=trials, seed=20240601 + n)
    standard_error = math.sqrt(exact * (1 - exact) / trials)
    assert abs(simulated - exact) <= 4 * standard_error


def test_clean_wins_give_the_closed_form_probability() -> None:
    # Beta(1 + 5, 1): P(θ > t) = 1 − t^6.
    assert prob_improvement(5, 0, margin=0.02, prior=FLAT_PRIOR) == pytest.approx(1 - 0.51 ** 6, abs=1e-12)


@pytest.mark.parametrize("margin", [-0.01, 1.0, 1.5, float("nan")])
def test_margin_outside_zero_one_is_refused(margin: float) -> None:
    with pytest.raises(ValueError, match="margin"):
        prob_improvement(3, 1, margin=margin)


@pytest.mark.parametrize(("wins", "losses"), [(-1.0, 0.0), (0.0, float("nan")), (float("inf"), 0.0)])
def test_bad_counts_are_refused_as_invalid_evidence(wins: float, losses: float) -> None:
    with pytest.raises(InvalidEvidenceError):
        prob_improvement(wins, losses, margin=0.0)


@pytest.mark.parametrize("prior", [(2.0, 1.0), (0.0, 0.0), (-1.0, 1.0), (1.0, float("inf"))])
def test_priors_that_favour_the_candidate_or_are_improper_are_refused(prior: tuple[float, float]) -> None:
    with pytest.raises(ValueError, match="prior"):
        prob_improvement(1, 1, margin=0.0, prior=prior)


@pytest.mark.parametrize("delta", [0.0, 0.5, 0.7, -0.1])
def test_delta_outside_open_zero_half_is_refused(delta: float) -> None:
    with pytest.raises(ValueError, match="delta"):
        false_accept_rate(10, delta=delta, margin=0.0)


def test_posterior_summary_carries_the_numbers_of_the_evidence() -> None:
    evidence = Evidence((Row("a", 0.0, 1.0), Row("b", 0.5, 0.25), Row("c", 0.4, 0.4), Row("d", 0.2, 0.7)))
    post = posterior_summary(evidence, delta=0.05, margin=0.02)
    assert post.wins == pytest.approx(1.5) and post.losses == pytest.approx(0.25) and post.n == 4
    assert post.p == prob_improvement(post.wins, post.losses, margin=0.02)
    assert post.mean_delta == pytest.approx(evidence.mean_delta())
    assert post.threshold == pytest.approx(0.95)
    assert post.passes is (post.p > 0.95)
    assert set(post.numbers()) >= {"wins", "losses", "n", "p", "mean_delta", "delta", "margin", "threshold"}
