"""Built-in scorers, table-driven, with the tricky cases each one is meant to get right."""

from __future__ import annotations

import functools
import math
import re
from typing import Any

import pytest

from agentgrad.data import (
    DataError,
    checked,
    contains,
    exact,
    f1,
    get_scorer,
    normalize,
    normalized_exact,
    numbers_in,
    numeric,
)
from agentgrad.errors import ConfigError, InvalidEvidenceError


@pytest.mark.parametrize(("output", "expected", "score"), [
    ("positive", "positive", 1.0),
    ("Positive", "positive", 0.0),
    ("positive ", "positive", 0.0),
    ("42", 42, 1.0),
    ("b", ["a", "b"], 1.0),
    ("c", ("a", "b"), 0.0),
])
def test_exact(output: str, expected: Any, score: float) -> None:
    assert exact(output, expected) == score


@pytest.mark.parametrize(("output", "expected", "score"), [
    ("  Positive.\n", "positive", 1.0),
    ('"negative"', "negative", 1.0),
    ("**Negative**", "negative", 1.0),
    ("`2021-03-05`.", "2021-03-05", 1.0),
    ("(positive)", "positive", 1.0),
    ("New   York", "new york", 1.0),
    ("positive!", "positive", 1.0),
    ("-3", "3", 0.0),
    ("f(x)", "f(x", 0.0),
    ("not positive", "positive", 0.0),
    ("positive", "negative", 0.0),
    ("ＰＯＳＩＴＩＶＥ", "positive", 1.0),
    ("2021-03-05", ["2021-03-05", "March 5, 2021"], 1.0),
])
def test_normalized_exact(output: str, expected: Any, score: float) -> None:
    assert normalized_exact(output, expected) == score


def test_normalize_keeps_signs_and_inner_punctuation() -> None:
    assert normalize(" '-3.' ") == "-3"
    assert normalize("e.g.") == "e.g"
    assert normalize("$5") == "$5"
    assert normalize("...") == ""


@pytest.mark.parametrize(("output", "expected", "score"), [
    ("The sentiment is Positive.", "positive", 1.0),
    ("The answer is 14.", "4", 0.0),
    ("The answer is 4.", "4", 1.0),
    ("a category error", "cat", 0.0),
    ("I think: New  York!", "new york", 1.0),
    ("Paris or Rome", ["London", "Rome"], 1.0),
    ("", "", 1.0),
    ("something", "", 0.0),
    ("costs $5 today", "$5", 1.0),
])
def test_contains_matches_whole_words(output: str, expected: Any, score: float) -> None:
    assert contains(output, expected) == score


@pytest.mark.parametrize(("text", "numbers"), [
    ("The answer is 42.", [42.0]),
    ("-3 and +2", [-3.0, 2.0]),
    ("It costs $1,234.50 in total", [1234.5]),
    ("half is 2/4", [0.5]),
    ("on 5/3/2021", []),
    ("2021-03-05", [2021.0]),
    ("the 5th runner ran 10km", []),
    ("1,2,3", []),
    ("version 12.5.3", []),
    ("1e3 or .5", [1000.0, 0.5]),
    ("50% of −7", [50.0, -7.0]),
    ("x=-3; y = 4", [-3.0, 4.0]),
    ("1/0 is undefined", []),
])
def test_numbers_in(text: str, numbers: list[float]) -> None:
    assert numbers_in(text) == numbers


@pytest.mark.parametrize(("output", "expected", "score"), [
    ("47 + 38 = 85", 85, 1.0),
    ("The answer is 85.", "85", 1.0),
    ("I get 1,234.5", 1234.5, 1.0),
    ("-3", -3, 1.0),
    ("-3", 3, 0.0),
    ("2/4", 0.5, 1.0),
    ("0.5000000001", 0.5, 1.0),
    ("0.51", 0.5, 0.0),
    ("no idea", 5, 0.0),
    ("85 or 86", [86, 87], 1.0),
    ("Step 1: 40. Step 2: 45. Answer: 85", 85, 1.0),
])
def test_numeric(output: str, expected: Any, score: float) -> None:
    assert numeric(output, expected) == score


def test_numeric_first_and_tolerance() -> None:
    assert numeric("85, since 47 + 38", 85, pick="first") == 1.0
    assert numeric("85, since 47 + 38", 85) == 0.0
    loose = functools.partial(numeric, tolerance=0.05)
    assert loose("3.14", 3.1416) == 1.0
    assert numeric("3.14", 3.1416) == 0.0


@pytest.mark.parametrize("expected", ["abc", "1 or 2", float("nan"), True])
def test_numeric_refuses_non_numeric_gold(expected: Any) -> None:
    with pytest.raises(DataError, match="not one finite number"):
        numeric("1", expected)


@pytest.mark.parametrize("kwargs", [{"tolerance": -1}, {"tolerance": math.inf}, {"pick": "middle"}])
def test_numeric_refuses_bad_options(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        numeric("1", 1, **kwargs)


@pytest.mark.parametrize(("output", "expected", "score"), [
    ("the Eiffel Tower", "Eiffel Tower", 1.0),
    ("Eiffel Tower in Paris", "the Eiffel Tower", 2 * (2 / 4 * 1.0) / (2 / 4 + 1.0)),
    ("Paris", "London", 0.0),
    ("a an the", "", 1.0),
    ("", "Paris", 0.0),
    ("cat cat dog", "cat dog dog", 2 / 3),
    ("Rome", ["Paris", "rome!"], 1.0),
])
def test_f1(output: str, expected: Any, score: float) -> None:
    assert f1(output, expected) == pytest.approx(score)


@pytest.mark.parametrize("scorer", [exact, normalized_exact, contains, numeric, f1])
def test_scorers_refuse_missing_gold_and_non_text_output(scorer: Any) -> None:
    with pytest.raises(DataError, match="gold"):
        scorer("x", None)
    with pytest.raises(DataError, match="empty list"):
        scorer("x", [])
    with pytest.raises(DataError, match="output as a string"):
        scorer(5, "5")


@pytest.mark.parametrize("name", ["exact", "normalized_exact", "contains", "numeric", "f1"])
def test_get_scorer_resolves_builtin_names(name: str) -> None:
    scorer = get_scorer(name)
    assert getattr(scorer, "__name__", "") == name
    assert scorer("1", "1") == 1.0


def test_get_scorer_passes_callables_and_lists_choices_on_unknown() -> None:
    def mine(output: str, expected: Any) -> float:
        return 0.5

    assert get_scorer(mine) is mine
    with pytest.raises(ConfigError, match=r"unknown scorer 'fuzzy'.*'contains', 'exact', 'f1'"):
        get_scorer("fuzzy")


@pytest.mark.parametrize("value", [1.5, -0.1, float("nan"), True, "1", None])
def test_checked_raises_naming_a_bad_value(value: Any) -> None:
    scorer = checked(lambda output, expected: value)
    with pytest.raises(InvalidEvidenceError, match=re.escape(repr(value))):
        scorer("x", "y")


def test_checked_passes_good_values_as_floats() -> None:
    scorer = checked(lambda output, expected: 1)
    assert scorer("x", "y") == 1.0 and isinstance(scorer("x", "y"), float)
    assert checked(exact)("a", "a") == 1.0
