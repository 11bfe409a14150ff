"""The shipped task sets: they load, ids are unique, labels balanced (routing: unequal on purpose), and every gold
answer checks out."""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from importlib import resources

import pytest

from agentgrad.data import (
    DataUnavailableError,
    available_sets,
    get_scorer,
    load_set,
    recommended_scorer,
    split,
)
from agentgrad.data.generate import arithmetic_rows, date_rows, to_jsonl

SETS = ["arithmetic", "dates", "routing", "sentiment"]


def test_available_sets_lists_the_shipped_sets() -> None:
    assert available_sets() == SETS


@pytest.mark.parametrize("name", SETS)
def test_each_set_loads_with_unique_ids_and_text_inputs(name: str) -> None:
    tasks = load_set(name)
    assert 50 <= len(tasks) <= 120
    assert len({t.id for t in tasks}) == len(tasks)
    assert len({t.input for t in tasks}) == len(tasks)
    assert all(t.input.strip() and t.expected is not None for t in tasks)


@pytest.mark.parametrize("name", SETS)
def test_recommended_scorer_gives_full_marks_to_the_gold(name: str) -> None:
    scorer = get_scorer(recommended_scorer(name))
    assert all(scorer(str(t.expected), t.expected) == 1.0 for t in load_set(name))


@pytest.mark.parametrize("name", SETS)
def test_each_set_splits_with_the_default_protocol(name: str) -> None:
    tasks = load_set(name)
    parts = split(tasks, seed=0)
    assert (len(parts.train), len(parts.val)) == (len(tasks) // 2, len(tasks) // 4)


def test_unknown_set_names_the_available_ones() -> None:
    with pytest.raises(DataUnavailableError, match=r"'poetry'.*'arithmetic', 'dates', 'routing', 'sentiment'"):
        load_set("poetry")
    with pytest.raises(DataUnavailableError):
        recommended_scorer("poetry")


def test_sentiment_labels_are_exact_and_balanced() -> None:
    tasks = load_set("sentiment")
    assert Counter(t.expected for t in tasks) == {"positive": 30, "negative": 30}
    assert {t.meta["domain"] for t in tasks} == {"movie", "product"}
    for domain in ("movie", "product"):
        labels = Counter(t.expected for t in tasks if t.meta["domain"] == domain)
        assert labels["positive"] == labels["negative"]


def test_arithmetic_answers_are_right() -> None:
    tasks = load_set("arithmetic")
    ops: Counter[str] = Counter()
    for task in tasks:
        match = re.fullmatch(r"What is (\d+) ([+\-×]) (\d+)\?", task.input)
        assert match is not None, task.input
        a, op, b = int(match[1]), match[2], int(match[3])
        assert 10 <= a <= 99 and 10 <= b <= 99
        assert task.expected == {"+": a + b, "-": a - b, "×": a * b}[op]
        assert isinstance(task.expected, int)
        ops[op] += 1
    assert ops == {"+": 20, "-": 20, "×": 20}


ROUTING_SIZES = {"billing": 32, "delivery": 17, "returns": 12, "account_access": 9, "device_fault": 7,
                 "cancellation": 6, "privacy_request": 5, "bulk_order": 4}


def test_routing_has_eight_queues_of_zipf_like_unequal_sizes() -> None:
    tasks = load_set("routing")
    assert len(tasks) == sum(ROUTING_SIZES.values()) == 92
    assert Counter(t.meta["queue_name"] for t in tasks) == ROUTING_SIZES
    sizes = sorted(Counter(t.expected for t in tasks).values(), reverse=True)
    assert sizes == sorted(ROUTING_SIZES.values(), reverse=True)
    assert len(set(sizes)) == len(sizes) and sizes[0] >= 5 * sizes[-1]
    assert sizes[0] > len(tasks) / 3  # the majority queue alone is a strong baseline, not a solution


def test_routing_codes_are_arbitrary_and_one_per_queue() -> None:
    """A code is three capitals, a dash and a digit, and shares no initial with its queue's name: no hint."""
    tasks = load_set("routing")
    code_of = {t.meta["queue_name"]: t.expected for t in tasks}
    assert {(t.meta["queue_name"], t.expected) for t in tasks} == set(code_of.items())  # one code per queue
    assert len(set(code_of.values())) == len(code_of) == 8
    for name, code in code_of.items():
        assert re.fullmatch(r"[A-Z]{3}-\d", code), code
        initials = {word[0].upper() for word in name.split("_")}
        assert not set(code[:3]) & initials, (name, code)
        assert code[:3].casefold() not in name.replace("_", " ")


def test_routing_messages_are_short_distinct_and_name_no_code() -> None:
    tasks = load_set("routing")
    codes = {t.expected for t in tasks}
    assert len({t.input.casefold() for t in tasks}) == len(tasks)
    assert all(10 <= len(t.input) <= 120 for t in tasks)
    assert not any(code.casefold() in t.input.casefold() for t in tasks for code in codes)


PATTERNS = ["%B %d, %Y", "%d %B %Y", "%b %d, %Y", "%A, %B %d, %Y", "%d/%m/%Y (day first)",
            "%m/%d/%Y (month first)", "%d.%m.%Y (day.month.year)", "%Y%m%d (YYYYMMDD)", "%Y/%m/%d (year/month/day)"]


def parse_written_date(text: str) -> dt.date:
    """An independent reading of the shipped date styles; fails unless exactly one style fits."""
    ordinal = re.fullmatch(r"(\d{1,2})(st|nd|rd|th) of ([A-Z][a-z]+) (\d{4})", text)
    if ordinal:
        day = int(ordinal[1])
        right = {1: "st", 2: "nd", 3: "rd", 21: "st", 22: "nd", 23: "rd", 31: "st"}.get(day, "th")
        assert ordinal[2] == right, f"wrong ordinal suffix in {text!r}"
        return dt.datetime.strptime(f"{day} {ordinal[3]} {ordinal[4]}", "%d %B %Y").date()
    found = set()
    for pattern in PATTERNS:
        try:
            parsed = dt.datetime.strptime(text, pattern)
        except ValueError:
            continue
        if "%A" in pattern:
            assert text.startswith(parsed.strftime("%A")), f"wrong weekday in {text!r}"
        found.add(parsed.date())
    assert len(found) == 1, f"{text!r} reads as {found}"
    return found.pop()


def test_date_gold_matches_a_parse_of_the_input() -> None:
    tasks = load_set("dates")
    prefix = "Write this date as YYYY-MM-DD: "
    for task in tasks:
        assert task.input.startswith(prefix)
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", task.expected)
        assert parse_written_date(task.input.removeprefix(prefix)).isoformat() == task.expected
    assert len(Counter(t.meta["format"] for t in tasks)) == 10


def test_numeric_date_styles_need_their_order_note() -> None:
    """Day-first and month-first dates are picked so that reading them the other way gives another date."""
    for task in load_set("dates"):
        if task.meta["format"] in ("slash_day_first", "slash_month_first", "dotted_day_first"):
            gold = dt.date.fromisoformat(task.expected)
            assert gold.day <= 12 and gold.day != gold.month


@pytest.mark.parametrize(("name", "rows"), [("arithmetic", arithmetic_rows), ("dates", date_rows)])
def test_generated_sets_match_their_generator(name: str, rows: object) -> None:
    shipped = resources.files("agentgrad.data").joinpath("sets", f"{name}.jsonl").read_text(encoding="utf-8")
    assert shipped == to_jsonl(rows())  # type: ignore[operator]
