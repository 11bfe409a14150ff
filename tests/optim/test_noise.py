"""The answer-noise estimate: counted on far rows only, its win-rate bound, loss rate and state dict."""

from __future__ import annotations

import itertools
import json
import math
from typing import Any

import pytest
from scipy.stats import beta

from agentgrad.core.evidence import Evidence, Row
from agentgrad.errors import StateDictError
from agentgrad.optim.noise import PRIOR_ROOM, PRIOR_WINS, SCREEN_TAIL, UPPER, NoiseEstimate


def far_evidence(rows: list[tuple[str, float, float]], far: tuple[str, ...] | None = None) -> Evidence:
    """Evidence of `rows` (task, base, candidate); every row is far unless `far` says which."""
    built = tuple(Row(t, b, c) for t, b, c in rows)
    return Evidence(built, far=tuple(r.task_id for r in built) if far is None else far)


def ties(n: int, base: float = 0.0, prefix: str = "t") -> Evidence:
    return far_evidence([(f"{prefix}{i}", base, base) for i in range(n)])


def test_an_empty_estimate_counts_nothing() -> None:
    assert NoiseEstimate().to_dict() == {"win_room": 0.0, "wins": 0.0, "loss_room": 0.0, "losses": 0.0,
                                         "screen_room": 0.0, "screen_wins": 0.0}


def test_a_win_on_a_base_failed_far_row_counts_as_a_win_with_its_room() -> None:
    noise = NoiseEstimate().added([far_evidence([("a", 0.0, 1.0)])])
    assert noise == NoiseEstimate(win_room=1.0, wins=1.0, loss_room=0.0, losses=0.0)


def test_a_loss_on_a_base_solved_far_row_counts_as_a_loss_with_its_room() -> None:
    noise = NoiseEstimate().added([far_evidence([("a", 1.0, 0.0)])])
    assert noise == NoiseEstimate(win_room=0.0, wins=0.0, loss_room=1.0, losses=1.0)


def test_fractional_scores_count_their_share_of_room_wins_and_losses() -> None:
    noise = NoiseEstimate().added([far_evidence([("up", 0.25, 0.75), ("down", 0.5, 0.25)])])
    assert noise.win_room == pytest.approx(0.75 + 0.5)
    assert noise.wins == pytest.approx(0.5)
    assert noise.loss_room == pytest.approx(0.25 + 0.5)
    assert noise.losses == pytest.approx(0.25)


def test_rows_that_are_not_far_are_not_counted() -> None:
    evidence = far_evidence([("near", 0.0, 1.0), ("lost", 1.0, 0.0), ("far", 0.0, 0.0)], far=("far",))
    assert NoiseEstimate().added([evidence]) == NoiseEstimate(win_room=1.0)


def test_evidence_without_far_marks_changes_nothing() -> None:
    start = NoiseEstimate(win_room=3.0, wins=1.0, loss_room=2.0, losses=0.5)
    assert start.added([Evidence.paired({"a": 0.0, "b": 1.0}, {"a": 1.0, "b": 0.0})]) == start
    assert start.added([]) == start


def test_added_accumulates_over_evidences_and_earlier_counts_and_leaves_the_old_estimate_alone() -> None:
    start = NoiseEstimate(win_room=2.0, wins=1.0)
    noise = start.added([far_evidence([("a", 0.0, 1.0)]), far_evidence([("a", 1.0, 1.0), ("b", 0.0, 0.0)])])
    assert noise == NoiseEstimate(win_room=4.0, wins=2.0, loss_room=1.0, losses=0.0)
    assert start == NoiseEstimate(win_room=2.0, wins=1.0)


def test_the_priors_bound_alone_is_about_0_17() -> None:
    bound = NoiseEstimate().win_upper()
    assert bound == pytest.approx(beta.ppf(UPPER, PRIOR_WINS, PRIOR_ROOM - PRIOR_WINS), rel=1e-9)
    assert bound == pytest.approx(0.17, abs=0.01)  # the docstring's figure (exactly, 0.1616)


def test_win_upper_falls_as_tie_only_far_rows_accumulate() -> None:
    noise, bounds = NoiseEstimate(), [NoiseEstimate().win_upper()]
    for step in range(6):
        noise = noise.added([ties(10, prefix=f"s{step}-")])
        bounds.append(noise.win_upper())
    assert all(later < earlier for earlier, later in itertools.pairwise(bounds))
    assert bounds[-1] < 0.06  # sixty quiet far rows outweigh the prior


def test_ties_on_base_solved_rows_give_no_room_to_win_and_leave_win_upper_alone() -> None:
    noise = NoiseEstimate().added([ties(20, base=1.0)])
    assert noise.win_room == 0.0 and noise.loss_room == 20.0
    assert noise.win_upper() == NoiseEstimate().win_upper()


def test_win_upper_rises_with_noise_wins_at_the_same_room() -> None:
    bounds = [NoiseEstimate(win_room=40.0, wins=float(k)).win_upper() for k in range(6)]
    assert all(later > earlier for earlier, later in itertools.pairwise(bounds))


def test_a_higher_credible_level_gives_a_higher_bound() -> None:
    noise = NoiseEstimate(win_room=30.0, wins=1.0)
    assert noise.win_upper(0.9) < noise.win_upper() < noise.win_upper(0.995)


def test_the_win_bound_covers_the_observed_win_rate() -> None:
    noise = NoiseEstimate(win_room=100.0, wins=10.0)
    assert noise.win_upper() > 0.1


def test_the_loss_rate_is_the_posterior_mean_with_half_a_loss_in_fifteen() -> None:
    assert NoiseEstimate().loss_rate() == pytest.approx(0.5 / 15)
    assert NoiseEstimate(loss_room=20.0, losses=2.0).loss_rate() == pytest.approx(2.5 / 35)
    assert NoiseEstimate().added([ties(85, base=1.0)]).loss_rate() == pytest.approx(0.5 / 100)


def test_the_state_dict_round_trips() -> None:
    noise = NoiseEstimate().added([far_evidence([("a", 0.25, 0.75), ("b", 0.5, 0.25), ("c", 1.0, 0.0)])])
    assert NoiseEstimate.load(noise.to_dict()) == noise


def test_the_state_dict_round_trips_through_json() -> None:
    noise = NoiseEstimate(win_room=12.5, wins=0.75, loss_room=3.0, losses=1.0 / 3.0)
    again = NoiseEstimate.load(json.loads(json.dumps(noise.to_dict())))
    assert again == noise
    assert again.win_upper() == noise.win_upper()


def test_loading_none_is_an_empty_estimate() -> None:
    assert NoiseEstimate.load(None) == NoiseEstimate()


def test_integer_counts_load() -> None:
    assert NoiseEstimate.load({"win_room": 3, "wins": 1, "loss_room": 0, "losses": 0}) == \
        NoiseEstimate(3.0, 1.0, 0.0, 0.0)


GOOD = {"win_room": 4.0, "wins": 1.0, "loss_room": 2.0, "losses": 1.0}


@pytest.mark.parametrize("data", [
    [1.0, 1.0, 1.0, 1.0],
    "win_room",
    {k: v for k, v in GOOD.items() if k != "losses"},
    {**GOOD, "extra": 0.0},
    {},
], ids=["list", "string", "missing-key", "extra-key", "empty"])
def test_malformed_state_dicts_are_refused(data: Any) -> None:
    with pytest.raises(StateDictError, match="noise estimate"):
        NoiseEstimate.load(data)


@pytest.mark.parametrize("name", sorted(GOOD))
@pytest.mark.parametrize("value", [-1.0, -1e-6, math.nan, math.inf, "1.0", None, True],
                         ids=["negative", "tiny-negative", "nan", "inf", "string", "none", "bool"])
def test_a_count_that_is_not_a_finite_number_at_least_zero_is_refused(name: str, value: Any) -> None:
    with pytest.raises(StateDictError, match=name):
        NoiseEstimate.load({**GOOD, name: value})


@pytest.mark.parametrize("data", [
    {"win_room": 1.0, "wins": 2.0, "loss_room": 0.0, "losses": 0.0},
    {"win_room": 0.0, "wins": 0.0, "loss_room": 1.0, "losses": 1.5},
    {"win_room": 0.0, "wins": 0.001, "loss_room": 0.0, "losses": 0.0},
], ids=["wins", "losses", "wins-without-room"])
def test_more_wins_or_losses_than_room_are_refused(data: dict[str, float]) -> None:
    with pytest.raises(StateDictError, match="more wins or losses than room"):
        NoiseEstimate.load(data)


def test_the_constructor_refuses_what_load_refuses() -> None:
    with pytest.raises(StateDictError):
        NoiseEstimate(win_room=-1.0)
    with pytest.raises(StateDictError):
        NoiseEstimate(win_room=1.0, wins=math.nan)


def test_rounding_within_a_billionth_of_the_room_is_accepted() -> None:
    assert NoiseEstimate(win_room=1.0, wins=1.0 + 1e-12).wins == 1.0 + 1e-12


def test_screens_count_their_room_and_wins_apart_from_the_far_rows() -> None:
    noise = NoiseEstimate(win_room=2.0, wins=1.0).screened([(0.0, 1.0), (0.0, 0.0), (0.5, 0.25), (1.0, 1.0)])
    assert (noise.screen_room, noise.screen_wins) == (2.5, 1.0)
    assert (noise.win_room, noise.wins) == (2.0, 1.0)


def test_many_screens_that_seldom_win_bring_a_bound_raised_by_a_few_lucky_far_rows_down() -> None:
    lucky = NoiseEstimate(win_room=7.0, wins=3.0)  # three noise wins in seven far rows: a wide bound
    screened = lucky.screened([(0.0, 1.0)] * 4 + [(0.0, 0.0)] * 92)
    assert lucky.win_upper() > 0.3
    assert screened.win_upper() < 0.15
    assert screened.row_win_upper() < 0.15
    level = 1 - (1 - UPPER) * SCREEN_TAIL  # far out in the tail: both bounds hold together nearly at UPPER
    assert screened.win_upper() == pytest.approx(beta.ppf(level, PRIOR_WINS + 4, PRIOR_ROOM - PRIOR_WINS + 92))


def test_screens_that_mostly_win_leave_the_far_rows_bound_as_it_was() -> None:
    far = NoiseEstimate(win_room=60.0, wins=1.0)
    screened = far.screened([(0.0, 1.0)] * 30 + [(0.0, 0.0)] * 10)  # a proposer that is mostly right
    assert screened.win_upper() == far.win_upper()
    assert screened.row_win_upper() == far.row_win_upper()


def test_without_screens_the_bound_is_the_far_rows_alone() -> None:
    far = NoiseEstimate(win_room=60.0, wins=1.0)
    assert far.win_upper() == pytest.approx(beta.ppf(UPPER, PRIOR_WINS + 1, PRIOR_ROOM - PRIOR_WINS + 59))


def test_a_state_dict_from_before_screens_were_counted_loads_with_none() -> None:
    assert NoiseEstimate.load(GOOD) == NoiseEstimate(**GOOD)
    screened = NoiseEstimate(**GOOD).screened([(0.0, 1.0)])
    assert NoiseEstimate.load(json.loads(json.dumps(screened.to_dict()))) == screened


def test_more_screen_wins_than_screen_room_are_refused() -> None:
    with pytest.raises(StateDictError, match="more wins or losses than room"):
        NoiseEstimate.load({**GOOD, "screen_room": 1.0, "screen_wins": 2.0})
