"""The learning benchmark's report: how it classifies committed diffs, summarises seeds and compares with gepa."""

from __future__ import annotations

from typing import Any

import pytest

from agentgrad.testing.presets import preset
from agentgrad.testing.world import ReferenceWorld
from learning_report import (
    attainable,
    calls_to,
    classify,
    goal_checks,
    per_call,
    per_call_table,
    reason_pattern,
    summarise,
    tables,
)


def _row(system: str, *, world: str = "w", workers: int = 1, seed: int = 0, test: float = 0.5,
         start: float = 0.2, curve: list[list[float]] | None = None, wrong: int = 0) -> dict[str, Any]:
    """A run row as learning_bench writes it, with a step curve of (calls, accuracy) and the noise-averaged
    figures equal to the drawn ones."""
    steps = curve if curve is not None else [[0, start], [50, test]]
    return {"world": world, "system": system, "workers": workers, "seed": seed, "test": test,
            "gain": test - start, "start_test": start, "optimum_test": 1.0, "test_expected": test,
            "gain_expected": test - start, "optimum_expected": 1.0, "calls_to_target": None,
            "seconds_to_target": None, "rules": {"right": 1, "wrong": wrong, "junk": 0}, "wrong_committed": wrong,
            "calls": 100, "wall": 1.0, "budget": 100, "curve": steps, "curve_expected": steps}


@pytest.fixture(name="world")
def _world() -> ReferenceWorld:
    return preset("quickstart", 0)


def test_a_diff_is_classified_by_what_its_lines_write(world: ReferenceWorld) -> None:
    category = world.categories[0]
    right = world.right_rule(category)
    wrong_method = next(m for m in range(1, 20) if m != world.methods[category])
    assert classify(world, [{"new": right}]) == "right"
    assert classify(world, [{"new": f"{category}: use method {wrong_method}"}]) == "wrong"
    assert classify(world, [{"new": "be concise: always"}]) == "junk"
    assert classify(world, [{"new": None}]) == "other"
    assert classify(world, None) == "unknown"


def test_a_wrong_line_makes_the_whole_diff_wrong_even_beside_a_right_one(world: ReferenceWorld) -> None:
    first, second = world.categories[:2]
    wrong_method = next(m for m in range(1, 20) if m != world.methods[second])
    ops = [{"new": world.right_rule(first)}, {"new": f"{second}: use method {wrong_method}"}]
    assert classify(world, ops) == "wrong"


def test_reasons_that_differ_only_in_numbers_and_ids_count_together() -> None:
    a = reason_pattern("accepted: 4 wins, 0 losses on 12 tasks (diff 1a2b3c4d5e)")
    b = reason_pattern("accepted: 7 wins, 1 losses on 30 tasks (diff 99aa88bb77)")
    assert a == b
    assert a != reason_pattern("rejected: 4 wins, 0 losses on 12 tasks (diff 1a2b3c4d5e)")


def test_calls_to_is_the_first_point_where_the_mean_curve_reaches_the_level() -> None:
    rows = [_row("x", curve=[[0, 0.2], [30, 0.6]]), _row("x", curve=[[0, 0.2], [70, 0.8]])]
    # mean: 0.2 until 30, 0.4 from 30, 0.7 from 70
    assert calls_to(rows, 0.4, 100, "curve") == 30
    assert calls_to(rows, 0.5, 100, "curve") == 70
    assert calls_to(rows, 0.7, 100, "curve") == 70
    assert calls_to(rows, 0.71, 100, "curve") is None


def test_calls_to_ignores_curve_points_past_the_budget() -> None:
    rows = [_row("x", curve=[[0, 0.2], [150, 0.9]])]
    assert calls_to(rows, 0.9, 100, "curve") is None
    assert calls_to(rows, 0.9, 150, "curve") == 150


def test_per_call_gives_gepas_calls_over_ours_to_gepas_final_level() -> None:
    rows = [_row("gepa", curve=[[0, 0.2], [80, 0.6]]),
            _row("agentgrad_sync", curve=[[0, 0.2], [20, 0.6], [60, 0.9]]),
            _row("agentgrad_async", curve=[[0, 0.2], [90, 0.5]])]
    out = per_call(rows)
    sync = out["agentgrad_sync"]["cells"]["w/1"]
    assert (sync["level"], sync["gepa_calls"], sync["calls"], sync["ratio"]) == (0.6, 80, 20, 4.0)
    assert out["agentgrad_sync"]["ratio_median"] == 4.0
    assert out["agentgrad_async"]["cells"]["w/1"]["calls"] is None
    assert out["agentgrad_async"]["unreached"] == ["w/1"]


def test_per_call_skips_cells_where_gepa_learned_nothing() -> None:
    rows = [_row("gepa", curve=[[0, 0.2]], test=0.2), _row("agentgrad_sync", curve=[[0, 0.2], [20, 0.6]])]
    assert per_call(rows) == {}


def test_the_goal_checks_flag_a_cell_behind_gepa_and_a_low_gain_ratio() -> None:
    rows = [_row("gepa", workers=1, test=0.6), _row("agentgrad_sync", workers=1, test=0.7),
            _row("gepa", workers=4, test=0.6), _row("agentgrad_sync", workers=4, test=0.5, wrong=1)]
    checks = goal_checks(summarise(rows), rows)["agentgrad_sync"]
    assert checks["accuracy_at_least_gepa"] is False
    assert checks["behind"] == ["w/S=4: 0.500 < 0.600"]
    assert checks["gain_ratio_overall"] == pytest.approx((0.5 + 0.3) / (0.4 + 0.4))
    assert checks["gain_ratio_ok"] is False
    assert checks["wrong_committed"] == 1


def test_cells_where_the_optimum_leaves_no_room_for_the_ratio_are_named_as_ceilings() -> None:
    rows = [_row("gepa", test=0.9, start=0.2), _row("agentgrad_sync", test=1.0, start=0.2)]
    checks = goal_checks(summarise(rows), rows)["agentgrad_sync"]
    cell = summarise(rows)["cells"]["w/1/agentgrad_sync"]
    assert attainable(cell, "test_mean") == pytest.approx(0.8)
    assert checks["ceiling_cells"] == ["w/1"]
    assert checks["gain_ratio_headroom"] is None
    assert checks["accuracy_at_least_gepa"] is True


def test_async_is_compared_with_sync_on_the_cells_both_ran() -> None:
    rows = [_row("agentgrad_sync", test=0.6), _row("agentgrad_async", test=0.7), _row("gepa", test=0.5)]
    versus = goal_checks(summarise(rows), rows)["async_vs_sync"]
    assert versus["cells"] == 1
    assert versus["gain_ratio"] == pytest.approx(0.5 / 0.4)


def test_a_cell_summarises_its_seeds() -> None:
    rows = [_row("gepa", seed=0, test=0.4), _row("gepa", seed=1, test=0.8)]
    cell = summarise(rows)["cells"]["w/1/gepa"]
    assert (cell["seeds"], cell["test_min"], cell["test_max"]) == (2, 0.4, 0.8)
    assert cell["test_mean"] == pytest.approx(0.6)


def test_the_tables_hold_every_cell_and_the_per_call_ratio() -> None:
    rows = [_row("gepa", curve=[[0, 0.2], [80, 0.6]], test=0.6),
            _row("agentgrad_sync", curve=[[0, 0.2], [20, 0.6]], test=0.6)]
    summary = summarise(rows)
    checks = goal_checks(summary, rows)
    text = tables(summary, checks)
    assert "| w | 1 |" in text
    assert "| w/1 | 0.600 | 80 | 20 (4.00) |" in per_call_table(checks)
    assert "median 4.00" in text
