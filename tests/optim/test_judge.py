"""The acceptance test: the documented thresholds, no-effect and tied changes never pass, harm is refused, and the
calibrated test keeps its false-accept bound under the null."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgrad.core.decision import Outcome
from agentgrad.core.diff import Diff
from agentgrad.core.evidence import Evidence, Row
from agentgrad.core.ops import Op
from agentgrad.optim.acceptance import accept_if
from agentgrad.optim.base import Batch, Candidate, Context, Head
from agentgrad.optim.judge import RowTally, binom_tail, judge, null_loss_rate, prefer_calibrated, wins_needed
from agentgrad.optim.noise import NoiseEstimate

ARTIFACT = "skills/s"
FIRST_LOOK = 0.035  # the default first look: 0.7 of δ = 0.05
QUIET = NoiseEstimate(win_room=400.0, wins=4.0, loss_room=400.0, losses=4.0)  # 1% noise, well measured


def outcome(evidence: Evidence, noise: NoiseEstimate | None) -> Outcome:
    stage = accept_if()
    candidate = Candidate(Diff(ARTIFACT, 0, (Op.add("key", "alpha: use method 3"),)), evidence)
    batch, _ = stage.update(Batch((candidate,)), stage.init(), Context({ARTIFACT: Head(0, "# s\n")}, noise=noise))
    (decision,) = batch.decisions
    return decision.outcome


def wins_and_ties(wins: int, n: int, *, calibrated: bool = False, focus: Sequence[str] = ()) -> Evidence:
    rows = tuple(Row(f"t{i:03d}", 0.0, 1.0 if i < wins else 0.0) for i in range(n))
    return Evidence(rows, focus=tuple(focus), calibrated=calibrated)


@pytest.mark.parametrize("n", [5, 6, 8, 12, 24, 40])
def test_the_sign_test_commits_a_change_with_no_loss_from_five_wins_and_not_before(n: int) -> None:
    assert wins_needed(n, delta=FIRST_LOOK, margin=0.02, noise=None) == 5
    for wins in range(n + 1):
        accepted = outcome(wins_and_ties(wins, n), None) is Outcome.ACCEPTED
        assert accepted == (wins >= 5), (wins, n)


@pytest.mark.parametrize("n", [2, 3, 4, 8, 16, 32])
def test_the_calibrated_test_commits_once_the_wins_reach_its_documented_threshold(n: int) -> None:
    need = wins_needed(n, delta=FIRST_LOOK, margin=0.02, noise=QUIET, calibrated=True)
    assert need is not None and need <= 5  # at 1% noise, a handful of wins on tasks the base failed is enough
    q = QUIET.win_upper()
    assert binom_tail(need, n, q) < FIRST_LOOK <= binom_tail(need - 1, n, q)
    for wins in range(n + 1):
        accepted = outcome(wins_and_ties(wins, n, calibrated=True), QUIET) is Outcome.ACCEPTED
        assert accepted == (wins >= need), (wins, n)


def test_ties_make_the_calibrated_test_stronger_than_the_sign_test_where_noise_is_low() -> None:
    assert wins_needed(4, delta=FIRST_LOOK, margin=0.02, noise=None) is None  # 4 of 4 can never pass the sign test
    assert outcome(wins_and_ties(3, 4, calibrated=True), QUIET) is Outcome.ACCEPTED
    assert prefer_calibrated(4, delta=FIRST_LOOK, margin=0.02, noise=QUIET)
    assert not prefer_calibrated(4, delta=FIRST_LOOK, margin=0.02, noise=None)
    noisy = NoiseEstimate(win_room=100.0, wins=30.0)  # 30% of failed tasks flip to a win with any edit
    assert not prefer_calibrated(24, delta=FIRST_LOOK, margin=0.02, noise=noisy)


def test_the_gain_is_looked_for_on_the_focus_rows() -> None:
    focus = [f"t{i:03d}" for i in range(4)]
    evidence = Evidence((*(Row(t, 0.0, 1.0) for t in focus), *(Row(f"r{i}", 0.0, 0.0) for i in range(40))),
                        focus=tuple(focus), calibrated=True)
    verdict = judge(evidence, delta=FIRST_LOOK, margin=0.02, noise=QUIET)
    assert verdict.focused and verdict.gain.n == 4 and verdict.total.n == 44 and verdict.passes


noise_estimates = st.one_of(st.none(), st.builds(
    lambda room, share, lroom, lshare: NoiseEstimate(room, room * share, lroom, lroom * lshare),
    st.floats(0, 500), st.floats(0, 1), st.floats(0, 500), st.floats(0, 1)))


@settings(derandomize=True, max_examples=200, deadline=None)
@given(n=st.integers(0, 200), base=st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=1, max_size=5),
       calibrated=st.booleans(), focus=st.integers(0, 10), noise=noise_estimates)
def test_a_change_with_no_effect_is_never_accepted_at_any_split_size(n: int, base: list[float], calibrated: bool,
                                                                     focus: int, noise: NoiseEstimate | None) -> None:
    rows = tuple(Row(f"t{i:03d}", base[i % len(base)], base[i % len(base)]) for i in range(n))
    evidence = Evidence(rows, focus=tuple(r.task_id for r in rows[:focus]), calibrated=calibrated)
    assert not judge(evidence, delta=0.49, margin=0.0, noise=noise).passes
    if n:
        assert outcome(evidence, noise) is Outcome.REJECTED


@settings(derandomize=True, max_examples=200, deadline=None)
@given(pairs=st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=1, max_size=30),
       calibrated=st.booleans(), noise=noise_estimates)
def test_an_exact_tie_is_never_accepted_whatever_the_noise(pairs: list[tuple[float, float]], calibrated: bool,
                                                           noise: NoiseEstimate | None) -> None:
    mirrored = [*pairs, *((c, b) for b, c in pairs)]  # every win has a loss of the same size
    rows = tuple(Row(f"t{i:03d}", b, c) for i, (b, c) in enumerate(mirrored))
    evidence = Evidence(rows, calibrated=calibrated)
    assert not judge(evidence, delta=0.49, margin=0.0, noise=noise).passes


def test_a_gain_bought_with_losses_beyond_the_noise_is_refused_as_harmful() -> None:
    rows = (*(Row(f"w{i}", 0.0, 1.0) for i in range(6)), *(Row(f"l{i}", 1.0, 0.0) for i in range(4)),
            *(Row(f"s{i}", 1.0, 1.0) for i in range(16)))
    evidence = Evidence(rows, focus=tuple(f"w{i}" for i in range(6)), calibrated=True)
    verdict = judge(evidence, delta=FIRST_LOOK, margin=0.02, noise=QUIET)
    assert verdict.p_value < FIRST_LOOK and verdict.harmful and not verdict.passes


def _trade(solved: int, failed: int) -> Evidence:
    """4 wins on 4 focus tasks the base failed, and a sample of `solved` + `failed` other tasks on which the
    candidate loses two of the `solved` (ties elsewhere)."""
    rows = (*(Row(f"w{i}", 0.0, 1.0) for i in range(4)), Row("l0", 1.0, 0.0), Row("l1", 1.0, 0.0),
            *(Row(f"s{i}", 1.0, 1.0) for i in range(solved - 2)), *(Row(f"f{i}", 0.0, 0.0) for i in range(failed)))
    return Evidence(rows, focus=tuple(f"w{i}" for i in range(4)), calibrated=True)


def test_two_losses_of_a_head_that_solves_only_what_luck_gives_are_not_harm() -> None:
    """With the noise not yet measured (its prior alone: q = 0.16), a head that solves 2 of 8 sampled tasks may owe
    both to the noise of its own text, which any edit draws again: losing both is what a change with no effect does.
    The same two losses where the head solved every sampled task are harm."""
    weak = judge(_trade(2, 6), delta=FIRST_LOOK, margin=0.02, noise=NoiseEstimate())
    assert not weak.harmful and weak.passes
    strong = judge(_trade(2, 0), delta=FIRST_LOOK, margin=0.02, noise=NoiseEstimate())
    assert strong.harmful and not strong.passes
    assert null_loss_rate(NoiseEstimate(), RowTally(0, 2, 6, 2, 8)) > 0.5 > NoiseEstimate().loss_upper()


def test_a_well_measured_quiet_noise_leaves_the_harm_check_as_it_was() -> None:
    """With q measured near 1%, few solved tasks can be luck: the null loss rate is near the loss bound."""
    assert null_loss_rate(QUIET, RowTally(0, 2, 2, 14, 16)) < QUIET.loss_upper() + 0.005
    assert null_loss_rate(QUIET, RowTally(0, 2, 6, 2, 8)) < 0.1
    assert judge(_trade(2, 6), delta=FIRST_LOOK, margin=0.02, noise=QUIET).harmful


def test_the_calibrated_test_keeps_its_false_accept_bound_under_the_null() -> None:
    rng = np.random.default_rng(7)
    accepted = trials = 0
    for _ in range(2000):
        q = rng.uniform(0.0, 0.1)  # the true noise: failed tasks flip to a win with chance q, solved ones to a loss
        far = rng.random(60) < q
        noise = NoiseEstimate(win_room=60.0, wins=float(far.sum()), loss_room=60.0, losses=float(far.sum()))
        n = int(rng.integers(2, 12))
        wins = rng.random(n) < q  # the candidate does nothing: its wins are noise
        rows = tuple(Row(f"t{i}", 0.0, float(w)) for i, w in enumerate(wins))
        evidence = Evidence(rows, calibrated=prefer_calibrated(n, delta=FIRST_LOOK, margin=0.02, noise=noise))
        trials += 1
        accepted += judge(evidence, delta=FIRST_LOOK, margin=0.02, noise=noise).passes
    assert accepted / trials < FIRST_LOOK


def test_wins_where_the_base_already_solves_most_tasks_are_judged_by_the_sign_test() -> None:
    # late in a run: the head solves 6 of the 8 tasks like the origin; its 2 failures are its own unlucky draws,
    # which any edit (junk too) may win back, so the noise rate measured elsewhere does not apply
    focus = tuple(f"f{i}" for i in range(8))
    rows = (*(Row(t, 1.0, 1.0) for t in focus[:6]), *(Row(t, 0.0, 1.0) for t in focus[6:]))
    verdict = judge(Evidence(rows, focus=focus, calibrated=True), delta=FIRST_LOOK, margin=0.02, noise=QUIET)
    assert verdict.test == "sign" and not verdict.passes
    failing = tuple(Row(t, 0.0, 1.0 if i < 2 else 0.0) for i, t in enumerate(focus))  # a failing cluster
    assert judge(Evidence(failing, focus=focus, calibrated=True), delta=FIRST_LOOK, margin=0.02, noise=QUIET).passes
