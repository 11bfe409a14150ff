"""Task locality: TF-IDF cosine neighbours of a task's input, without digit-only or single-task tokens."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgrad.runtime.locality import Locality, tokens

ULP = 1e-12  # cosines of unit vectors may land a few ulps past 1 or differ by summation order

CATEGORIES = {
    "billing": ["my invoice shows a double charge on the card", "refund the charge on my invoice please",
                "why was my card charged twice on this invoice"],
    "shipping": ["the parcel is late and tracking shows no delivery", "tracking says the parcel was lost in delivery",
                 "my parcel delivery is late again"],
    "login": ["i cannot login the password reset email never came", "password reset link fails at login",
              "locked out of login after a password reset"],
}
INPUTS = {f"{cat}-{i}": text for cat, texts in CATEGORIES.items() for i, text in enumerate(texts)}


def category(task_id: str) -> str:
    return task_id.split("-")[0]


def test_tokens_are_lower_cased_words_without_digit_only_tokens() -> None:
    assert tokens("Order #12345 shipped, A1 sized, 2024-01-05 ÉTÉ snake_case") == \
        ["order", "shipped", "a1", "sized", "été", "snake", "case"]


def test_tokens_of_an_empty_or_numeric_text_are_empty() -> None:
    assert tokens("") == []
    assert tokens("12 345 6.78 -9") == []


def test_a_task_is_most_like_the_tasks_of_its_own_category() -> None:
    locality = Locality(INPUTS)
    for origin in INPUTS:
        near = locality.similarities(origin)
        same = [near.get(t, 0.0) for t in INPUTS if t != origin and category(t) == category(origin)]
        other = [near.get(t, 0.0) for t in INPUTS if category(t) != category(origin)]
        assert min(same) > 0
        assert min(same) > max(other), origin


def test_two_tasks_sharing_only_numbers_have_similarity_zero() -> None:
    locality = Locality({"a": "order 12345", "b": "invoice 12345", "c": "order shipped", "d": "invoice paid"})
    assert locality.similarity("a", "b") == 0.0
    assert "b" not in locality.similarities("a")
    assert locality.similarity("a", "c") > 0  # their vectors are not empty: the zero is the digits' doing
    assert locality.similarity("b", "d") > 0


def test_a_token_in_only_one_task_changes_no_similarity() -> None:
    base = {"a": "refund late order", "b": "refund late parcel", "c": "order parcel login"}
    plain = Locality(base)
    marked = Locality({**base, "a": "refund late order zebra quagga"})
    for x, y in itertools.combinations(base, 2):
        assert marked.similarity(x, y) == pytest.approx(plain.similarity(x, y), abs=ULP)


def test_a_task_whose_tokens_are_all_unique_is_like_no_other() -> None:
    locality = Locality({"a": "refund order", "b": "refund parcel", "lonely": "xylophone quasar"})
    assert locality.similarity("lonely", "a") == 0.0
    assert locality.similarities("lonely") == {}


def test_a_token_in_every_task_links_nothing() -> None:
    locality = Locality({"a": "please refund", "b": "please login", "c": "please reset"})
    assert locality.similarities("a") == {}


def test_identical_inputs_have_similarity_one() -> None:
    locality = Locality({"a": "refund the order", "b": "refund the order", "c": "login reset"})
    assert locality.similarity("a", "b") == pytest.approx(1.0, abs=ULP)


def test_unknown_ids_have_similarity_zero_and_no_neighbours() -> None:
    locality = Locality(INPUTS)
    assert locality.similarity("ghost", "billing-0") == 0.0
    assert locality.similarity("billing-0", "ghost") == 0.0
    assert locality.similarity("ghost", "ghost") == 0.0
    assert locality.similarities("ghost") == {}


def test_no_tasks_at_all_gives_no_neighbours() -> None:
    locality = Locality({})
    assert locality.similarities("a") == {}
    assert locality.similarity("a", "b") == 0.0


def test_the_origin_is_never_among_its_own_similarities() -> None:
    locality = Locality({**INPUTS, "twin": INPUTS["billing-0"]})
    for origin in (*INPUTS, "twin"):
        assert origin not in locality.similarities(origin)
    assert locality.similarities("twin")["billing-0"] == pytest.approx(1.0, abs=ULP)


def test_similarities_hold_only_positive_scores_equal_to_similarity() -> None:
    locality = Locality(INPUTS)
    for origin in INPUTS:
        near = locality.similarities(origin)
        assert all(s > 0 for s in near.values())
        expected = {t for t in INPUTS if t != origin and locality.similarity(origin, t) > 0}
        assert set(near) == expected
        for task, s in near.items():
            assert s == locality.similarity(origin, task)


def test_similarities_are_remembered_per_origin() -> None:
    locality = Locality(INPUTS)
    assert locality.similarities("billing-0") is locality.similarities("billing-0")


def test_the_cache_stays_bounded_when_asked_about_many_origins() -> None:
    locality = Locality(INPUTS)
    expected = dict(locality.similarities("billing-0"))
    for i in range(5000):
        locality.similarities(f"origin-{i}")
        assert len(locality._near) <= 4096
    assert dict(locality.similarities("billing-0")) == expected  # recomputed alike after the cache was cleared


words = st.sampled_from(["refund", "order", "parcel", "late", "login", "reset", "card", "invoice", "42", "7", "a1",
                         "the"])
texts = st.lists(words, min_size=0, max_size=8).map(" ".join)


@settings(max_examples=150, deadline=None)
@given(st.lists(texts, min_size=1, max_size=8))
def test_similarity_is_in_the_unit_interval_and_symmetric(inputs: list[str]) -> None:
    locality = Locality({f"t{i}": text for i, text in enumerate(inputs)})
    ids = [f"t{i}" for i in range(len(inputs))]
    for a, b in itertools.product(ids, repeat=2):
        s = locality.similarity(a, b)
        assert -ULP <= s <= 1.0 + ULP
        assert s == pytest.approx(locality.similarity(b, a), abs=ULP)


def test_the_neighbours_depend_on_the_inputs_only_not_their_order() -> None:
    items = list(INPUTS.items())
    random.Random(7).shuffle(items)
    shuffled, plain = Locality(dict(items)), Locality(INPUTS)
    for origin in INPUTS:
        assert dict(shuffled.similarities(origin)) == pytest.approx(dict(plain.similarities(origin)), abs=ULP)
