"""Splits are disjoint, covering, deterministic, order-independent, and keep label proportions within one."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgrad.data import DataError, Splits, Task, split
from agentgrad.errors import ConfigError

LAWS = settings(derandomize=True, max_examples=60, deadline=None)


def make_tasks(labels: list[str]) -> list[Task]:
    return [Task(f"t{k:04d}", f"input {k}", label, {"label": label}) for k, label in enumerate(labels)]


def label_of(task: Task) -> str:
    return str(task.meta["label"])


fractions_st = st.tuples(st.integers(0, 8), st.integers(1, 8), st.integers(0, 8)).map(
    lambda w: (w[0] / sum(w), w[1] / sum(w), w[2] / sum(w)))
labels_st = st.lists(st.sampled_from(["a", "b", "c"]), min_size=8, max_size=80)


def ids(tasks: tuple[Task, ...]) -> set[str]:
    return {t.id for t in tasks}


def try_split(tasks: list[Task], **kwargs: object) -> Splits | None:
    try:
        return split(tasks, **kwargs)  # type: ignore[arg-type]
    except DataError:
        return None


@LAWS
@given(labels_st, fractions_st, st.integers(0, 10_000), st.booleans())
def test_split_is_disjoint_covering_and_sized_by_fraction(labels: list[str], fractions: tuple[float, float, float],
                                                          seed: int, stratified: bool) -> None:
    tasks = make_tasks(labels)
    parts = try_split(tasks, fractions=fractions, seed=seed, stratify=label_of if stratified else None)
    if parts is None:  # refused only when no group can spare a validation task
        largest = max(Counter(labels).values()) if stratified else len(tasks)
        assert fractions[1] * largest < 1
        return
    train, val, test = ids(parts.train), ids(parts.val), ids(parts.test)
    assert not (train & val or train & test or val & test)
    assert train | val | test == ids(tuple(tasks))
    assert len(parts.train) + len(parts.val) + len(parts.test) == len(tasks)
    assert parts.val
    if not stratified:
        for part, fraction in zip((parts.train, parts.val, parts.test), fractions, strict=True):
            assert abs(len(part) - fraction * len(tasks)) < 1


@LAWS
@given(labels_st, fractions_st, st.integers(0, 10_000))
def test_stratified_split_keeps_each_label_within_one_of_its_share(labels: list[str],
                                                                   fractions: tuple[float, float, float],
                                                                   seed: int) -> None:
    parts = try_split(make_tasks(labels), fractions=fractions, seed=seed, stratify=label_of)
    if parts is None:
        return
    totals = Counter(labels)
    for part, fraction in zip((parts.train, parts.val, parts.test), fractions, strict=True):
        counts = Counter(label_of(t) for t in part)
        for label, total in totals.items():
            assert abs(counts[label] - fraction * total) < 1


@LAWS
@given(labels_st, st.integers(0, 10_000), st.randoms(use_true_random=False))
def test_split_is_deterministic_and_independent_of_input_order(labels: list[str], seed: int, rng: object) -> None:
    tasks = make_tasks(labels)
    shuffled = list(tasks)
    rng.shuffle(shuffled)  # type: ignore[attr-defined]
    first, again, reordered = split(tasks, seed=seed), split(tasks, seed=seed), split(shuffled, seed=seed)
    assert first == again
    for a, b in zip((first.train, first.val, first.test), (reordered.train, reordered.val, reordered.test),
                    strict=True):
        assert ids(a) == ids(b)


def test_parts_keep_the_input_order() -> None:
    tasks = make_tasks(["x"] * 20)
    parts = split(tasks)
    for part in (parts.train, parts.val, parts.test):
        positions = [tasks.index(t) for t in part]
        assert positions == sorted(positions)


def test_different_seeds_give_different_splits() -> None:
    tasks = make_tasks(["x"] * 40)
    assert len({tuple(t.id for t in split(tasks, seed=s).val) for s in range(5)}) > 1


def test_stratified_sentiment_like_split_balances_labels() -> None:
    tasks = make_tasks(["pos"] * 30 + ["neg"] * 30)
    parts = split(tasks, seed=3, stratify=label_of)
    val = Counter(label_of(t) for t in parts.val)
    assert sorted(val.values()) == [7, 8]
    assert Counter(label_of(t) for t in parts.train) == {"pos": 15, "neg": 15}


def test_protocol_describes_the_split() -> None:
    tasks = make_tasks(["a", "b"] * 10)
    assert split(tasks).protocol == "train/val/test 50/25/25, seed 0"
    assert split(tasks, fractions=(0.6, 0.2, 0.2), seed=7, stratify=label_of).protocol == \
        "train/val/test 60/20/20, seed 7, stratified"


def test_to_dict_lists_ids_per_part() -> None:
    parts = split(make_tasks(["a"] * 8))
    record = parts.to_dict()
    assert record["protocol"] == parts.protocol
    assert sorted(record["train"] + record["val"] + record["test"]) == sorted(t.id for t in make_tasks(["a"] * 8))


def test_too_small_set_for_a_validation_split_is_a_clear_error() -> None:
    with pytest.raises(DataError, match="1 tasks are too few for a non-empty validation split"):
        split(make_tasks(["a"]))
    with pytest.raises(DataError, match="too few"):
        split(make_tasks(["a"] * 4), fractions=(0.9, 0.05, 0.05))


def test_smallest_sets_that_fit_give_a_validation_task() -> None:
    parts = split(make_tasks(["a", "b"]))
    assert len(parts.val) == 1
    assert math.isclose(sum(map(len, (parts.train, parts.val, parts.test))), 2)


@pytest.mark.parametrize("fractions", [(0.5, 0.5), (0.5, 0.3, 0.3), (0.6, 0.0, 0.4), (-0.1, 0.6, 0.5),
                                       (float("nan"), 0.5, 0.5)])
def test_bad_fractions_are_config_errors(fractions: tuple[float, ...]) -> None:
    with pytest.raises(ConfigError, match="fraction"):
        split(make_tasks(["a"] * 10), fractions=fractions)


def test_duplicate_ids_are_refused() -> None:
    with pytest.raises(DataError, match="appears twice"):
        split([Task("a", "1"), Task("a", "2"), Task("b", "3")])


@pytest.mark.parametrize(("call", "says"), [
    (lambda: split(None), r"^tasks must be a sequence of Task values, got NoneType$"),  # type: ignore[arg-type]
    (lambda: split([1, 2]), r"^tasks must hold only Task values, got int at index 0$"),  # type: ignore[list-item]
    (lambda: split(make_tasks(["a"] * 4), stratify=3),  # type: ignore[arg-type]
     r"^stratify \(a function task -> label\) must be a function, got int$"),
    (lambda: split(make_tasks(["a"] * 4), stratify=lambda t: t.meta["nope"]),
     r"^stratify failed on task '.*': KeyError: 'nope' \(it must return a hashable label for every task\)$"),
    (lambda: split(make_tasks(["a"] * 4), stratify=lambda t: [t.id]),  # type: ignore[arg-type, return-value]
     r"^stratify failed on task '.*': TypeError: unhashable type: 'list'"),
    (lambda: Splits(None, (), (), "p"), r"^Splits.train must be a sequence of Task values"),  # type: ignore[arg-type]
], ids=["none", "ints", "stratify-not-callable", "stratify-raises", "stratify-unhashable", "splits-none"])
def test_tasks_and_stratify_of_the_wrong_kind_are_data_errors(call: Callable[[], Any], says: str) -> None:
    with pytest.raises(DataError, match=says):
        call()
