"""The argument checks: bools are not numbers, NaN and infinities are refused, bounds hold, messages name the value."""

from __future__ import annotations

import doctest
import math
import re
from collections.abc import Callable
from typing import Any

import pytest

from agentgrad.core import _checks
from agentgrad.core._checks import (
    flag,
    function,
    integer,
    is_integer,
    is_number,
    items,
    member,
    number,
    one_of,
    probability,
    text,
)
from agentgrad.core.artifact import Kind, Layer
from agentgrad.errors import ConfigError, InvalidEvidenceError, StateDictError


@pytest.mark.parametrize("value", [True, False])
def test_a_bool_is_refused_where_an_int_or_a_number_is_asked(value: bool) -> None:
    with pytest.raises(ConfigError, match=rf"got {value}$"):
        integer(value, "n")
    with pytest.raises(ConfigError, match=rf"got {value}$"):
        number(value, "x")
    with pytest.raises(ConfigError, match=rf"got {value}$"):
        probability(value, "p")
    assert not is_integer(value) and not is_number(value, finite=False)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_nan_and_infinities_are_refused_as_finite_numbers(value: float) -> None:
    with pytest.raises(ConfigError, match="x must be a finite number, got"):
        number(value, "x")
    with pytest.raises(ConfigError, match="p must be a probability"):
        probability(value, "p")
    assert not is_number(value)


def test_finite_false_lets_infinities_through_but_a_bound_still_refuses_nan() -> None:
    assert number(math.inf, "rate", above=0, finite=False) == math.inf
    with pytest.raises(ConfigError, match="rate must be a number > 0, got nan"):
        number(math.nan, "rate", above=0, finite=False)
    assert is_number(math.nan, finite=False)


@pytest.mark.parametrize(("value", "low", "high", "message"), [
    (0, 1, None, "k must be an int >= 1, got 0"),
    (9, 0, 8, "k must be an int in [0, 8], got 9"),
    (-1, 0, 8, "k must be an int in [0, 8], got -1"),
    (6, None, 5, "k must be an int <= 5, got 6"),
    (2.0, None, None, "k must be an int, got 2.0"),
    ("3", None, None, "k must be an int, got '3'"),
])
def test_integer_bounds_are_inclusive_and_a_refusal_says_which(value: object, low: int | None, high: int | None,
                                                                message: str) -> None:
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        integer(value, "k", low=low, high=high)


def test_integer_returns_the_value_on_and_inside_its_bounds() -> None:
    assert [integer(v, "k", low=0, high=8) for v in (0, 4, 8)] == [0, 4, 8]
    assert integer(-(10**30), "seed") == -(10**30)


@pytest.mark.parametrize(("value", "bounds", "message"), [
    (0, {"above": 0}, "x must be a finite number > 0, got 0"),
    (-0.5, {"low": 0}, "x must be a finite number >= 0, got -0.5"),
    (0.5, {"low": 0, "below": 0.5}, "x must be a number in [0, 0.5), got 0.5"),
    (0.0, {"above": 0, "high": 1}, "x must be a number in (0, 1], got 0.0"),
    (1.01, {"high": 1}, "x must be a finite number <= 1, got 1.01"),
    (2, {"below": 1.5}, "x must be a finite number < 1.5, got 2"),
    ("1", {}, "x must be a finite number, got '1'"),
])
def test_number_bounds_open_and_closed_and_the_refusal_says_which(value: object, bounds: dict[str, Any],
                                                                  message: str) -> None:
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        number(value, "x", **bounds)


def test_number_returns_a_float_on_its_closed_bounds() -> None:
    assert number(0, "x", low=0, high=1) == 0.0 and isinstance(number(0, "x", low=0, high=1), float)
    assert number(1, "x", low=0, high=1) == 1.0
    assert probability(1, "p") == 1.0 and probability(0.0, "p") == 0.0


def test_an_int_too_large_for_a_float_is_refused_not_an_overflow() -> None:
    with pytest.raises(ConfigError, match="x must be a finite number >= 0"):
        number(10**400, "x", low=0)


def test_giving_both_an_open_and_a_closed_bound_on_one_side_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        number(0.5, "x", low=0, above=0)
    with pytest.raises(TypeError):
        is_number(0.5, high=1, below=1)


@pytest.mark.parametrize("error", [ConfigError, InvalidEvidenceError, StateDictError])
def test_each_helper_raises_the_error_class_it_is_given(error: type[Exception]) -> None:
    calls: list[Callable[[], object]] = [
        lambda: integer(-1, "a", low=0, error=error), lambda: number(math.nan, "a", error=error),
        lambda: probability(2, "a", error=error), lambda: flag(1, "a", error=error),
        lambda: text("", "a", error=error), lambda: one_of("c", "a", ("x", "y"), error=error)]
    for call in calls:
        with pytest.raises(error) as info:
            call()
        assert type(info.value) is error


def test_the_message_names_the_argument_says_what_was_expected_and_shows_what_was_got() -> None:
    with pytest.raises(ConfigError) as info:
        integer(0, "Workers.rollout", low=1)
    assert str(info.value) == "Workers.rollout must be an int >= 1, got 0"


def test_a_long_refused_value_is_cut_in_the_message() -> None:
    with pytest.raises(ConfigError) as info:
        number("y" * 1000, "x")
    assert len(str(info.value)) < 40 + _checks.SHOWN and str(info.value).startswith("x must be a finite number, got")


def test_flag_accepts_only_real_bools() -> None:
    assert flag(True, "on") is True and flag(False, "on") is False
    for value in (0, 1, "yes", None):
        with pytest.raises(ConfigError, match="on must be True or False"):
            flag(value, "on")


def test_text_refuses_non_strings_by_type_and_empty_or_blank_ones_on_request() -> None:
    assert text("", "s", empty=True) == "" and text(" x ", "s", strip=True) == " x "
    with pytest.raises(ConfigError, match=r"^s must be a string, got int$"):
        text(3, "s", empty=True)
    with pytest.raises(ConfigError, match=r"^s must be a non-empty string, got ''$"):
        text("", "s")
    assert text("  ", "s") == "  "
    with pytest.raises(ConfigError, match=r"^s must be a non-blank string, got '  '$"):
        text("  ", "s", strip=True)


def test_one_of_returns_the_choice_and_lists_the_choices_when_refusing() -> None:
    assert one_of("warn", "on_error", ("raise", "warn")) == "warn"
    with pytest.raises(ConfigError, match=r"^pick must be 'first' or 'last', got 'middle'$"):
        one_of("middle", "pick", ("first", "last"))
    with pytest.raises(ConfigError, match=r"^pool must be one of 'a', 'b', 'c', got None$"):
        one_of(None, "pool", ("a", "b", "c"))


def test_member_takes_an_enum_member_or_its_value_and_lists_the_values_when_refusing() -> None:
    assert member("skill", "kind", Kind) is Kind.SKILL and member(Layer.L0, "layer", Layer) is Layer.L0
    for bad in ("L9", None, ["L0"]):
        with pytest.raises(ConfigError, match=r"^layer must be one of 'L0', 'L1', 'L2', got "):
            member(bad, "layer", Layer)


@pytest.mark.parametrize(("value", "message"), [
    (None, "xs must be a sequence of int values, got NoneType"),
    ("12", "xs must be a sequence of int values, got str"),
    ({"a": 1}, "xs must be a sequence of int values, got dict"),
    (5, "xs must be a sequence of int values, got int"),
    ([1, "2"], "xs must hold only int values, got str at index 1"),
])
def test_items_refuses_what_is_no_sequence_of_the_kind_and_says_which_item(value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        items(value, "xs", int)
    assert items(iter([1, 2]), "xs", int) == (1, 2) and items([], "xs", int) == ()


def test_function_refuses_what_cannot_be_called() -> None:
    assert function(len, "f") is len
    with pytest.raises(InvalidEvidenceError, match=r"^f must be a function, got int$"):
        function(3, "f", error=InvalidEvidenceError)


def test_the_predicates_agree_with_the_raising_helpers() -> None:
    assert is_integer(3, low=3, high=3) and not is_integer(2, low=3) and not is_integer(3.0)
    assert is_number(0.5, above=0, below=1) and not is_number(0, above=0) and not is_number(None)


def test_the_module_examples_run_as_written() -> None:
    result = doctest.testmod(_checks)
    assert result.attempted >= 5 and result.failed == 0
