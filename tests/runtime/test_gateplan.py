"""The gate's plan: the tasks like the origin first, then a seeded sample of the rest, from the inputs alone."""

from __future__ import annotations

from agentgrad.runtime.gateconfig import GateConfig
from agentgrad.runtime.gateplan import GatePlan
from agentgrad.runtime.locality import Locality

INPUTS = {
    **{f"d{i}": f"what weekday is the date {i} march of year {2000 + i}" for i in range(6)},
    **{f"g{i}": f"area of a triangle with sides {i} and {i + 2} in a square grid" for i in range(6)},
    **{f"s{i}": f"reverse the string token{i} and count vowels" for i in range(6)},
}


def _plan(**config: int | None) -> GatePlan:
    pool = [t for t in INPUTS if t != "d0"]
    return GatePlan(pool, GateConfig(**config), seed=3, margin=0.02,  # type: ignore[arg-type]
                    locality=Locality(INPUTS))


def test_the_focus_is_the_tasks_like_the_origin_and_the_rest_a_seeded_order_of_the_others() -> None:
    plan = _plan(focus=4)
    focus, rest = plan.plan("base", 0, "d0")
    assert len(focus) == 4 and all(t.startswith("d") for t in focus)
    assert sorted([*focus, *rest]) == sorted(plan.pool)
    assert plan.plan("base", 0, "d0") == (focus, rest)  # the same inputs and seed: the same plan
    assert plan.plan("base", 1, "d0")[1] != rest  # a new head: a new sample of the rest


def test_a_second_look_widens_the_focus_and_further_names_only_the_tasks_it_adds() -> None:
    plan = _plan(focus=2)
    first, _ = plan.plan("base", 0, "d0", looks=1)
    second, _ = plan.plan("base", 0, "d0", looks=2)
    assert first == second[:2] and len(second) == 4
    assert plan.further("base", 0, "d0", 2, focus=first, scored=first) == set(second) - set(first)


def test_tasks_whose_base_score_is_cached_come_first_in_the_rest() -> None:
    cached = {"g5", "s4"}
    plan = GatePlan([t for t in INPUTS if t != "d0"], GateConfig(focus=2), seed=3, margin=0.02,
                    locality=Locality(INPUTS), known=lambda text: cached)
    focus, rest = plan.plan("base", 0, "d0")
    assert not cached & set(focus) and set(rest[:2]) == cached  # they cost one call instead of two


def test_the_far_tasks_are_those_at_or_below_the_median_likeness_to_the_origin() -> None:
    plan = _plan()
    far = plan.far("d0", [t for t in INPUTS if t != "d0"])
    assert far and not any(t.startswith("d") for t in far)
    assert plan.far(None, ["g1", "d2"]) == ["g1", "d2"]  # no origin: every task
    assert "g0" not in plan.far("g0", list(INPUTS))  # a task is never far from itself
    assert set(plan.neighbours("g0")) <= {f"g{i}" for i in range(1, 6)}
