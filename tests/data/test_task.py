"""Tasks and rows: validation, field selection, stable ids, and errors that name the row and its fields."""

from __future__ import annotations

from typing import Any

import pytest

from agentgrad.data import DataError, Task, check_unique, tasks_from_rows
from agentgrad.errors import InvalidIdError


def test_task_meta_is_read_only_copy() -> None:
    meta = {"label": "x"}
    task = Task("t1", "hello", "gold", meta)
    meta["label"] = "changed"
    assert task.meta["label"] == "x"
    with pytest.raises(TypeError):
        task.meta["label"] = "y"  # type: ignore[index]


def test_task_with_list_gold_is_hashable_and_round_trips() -> None:
    task = Task("t1", "q", ["a", "b"], {"k": [1, 2]})
    assert hash(task) == hash(Task("t1", "q", ["other"], {}))
    assert Task.from_dict(task.to_dict()) == task


@pytest.mark.parametrize("bad_id", ["", "x" * 201, "a\x00b", 7, None, "t3\ud800"])
def test_task_refuses_unusable_ids(bad_id: Any) -> None:
    with pytest.raises(InvalidIdError):
        Task(bad_id, "q")


def test_task_accepts_free_form_ids_up_to_200_chars() -> None:
    assert Task("gsm8k test #17 / part a", "q").id == "gsm8k test #17 / part a"
    assert len(Task("y" * 200, "q").id) == 200


def test_task_input_must_be_text() -> None:
    with pytest.raises(DataError, match="input must be a string"):
        Task("t", 12)  # type: ignore[arg-type]


def test_rows_become_tasks_with_positional_ids_and_meta() -> None:
    rows = [{"question": "2+2?", "answer": 4, "level": 1}, {"question": "3+3?", "answer": 6, "level": 2}]
    tasks = tasks_from_rows(rows)
    assert [t.id for t in tasks] == ["r00000", "r00001"]
    assert [t.input for t in tasks] == ["2+2?", "3+3?"]
    assert [t.expected for t in tasks] == [4, 6]
    assert dict(tasks[1].meta) == {"level": 2}


def test_rows_use_named_fields_callables_and_id_field() -> None:
    rows = [{"key": 17, "text": "good film", "label": 1}, {"key": "b", "text": "bad film", "label": 0}]
    tasks = tasks_from_rows(rows, prompt=lambda r: f"Review: {r['text']}",
                            gold=lambda r: "positive" if r["label"] else "negative", id="key")
    assert [t.id for t in tasks] == ["17", "b"]
    assert tasks[0].input == "Review: good film"
    assert [t.expected for t in tasks] == ["positive", "negative"]
    assert dict(tasks[0].meta) == {"text": "good film", "label": 1}


def test_rows_without_gold_give_none() -> None:
    assert tasks_from_rows([{"question": "hi"}], gold=None)[0].expected is None


def test_missing_field_error_names_row_field_and_available_fields() -> None:
    rows = [{"question": "a", "answer": 1}, {"prompt": "b", "answer": 2}]
    with pytest.raises(DataError) as info:
        tasks_from_rows(rows)
    message = str(info.value)
    assert "row 1" in message and "'question'" in message and "['answer', 'prompt']" in message


def test_missing_field_in_callable_names_the_row() -> None:
    with pytest.raises(DataError, match="row 0"):
        tasks_from_rows([{"a": 1}], prompt=lambda r: r["text"])


def test_missing_id_field_is_an_error() -> None:
    with pytest.raises(DataError, match="no field 'uid'"):
        tasks_from_rows([{"question": "a", "answer": 1}], id="uid")


def test_duplicate_ids_name_both_rows() -> None:
    rows = [{"id": "x", "question": "a", "answer": 1}, {"id": "y", "question": "b", "answer": 1},
            {"id": "x", "question": "c", "answer": 1}]
    with pytest.raises(DataError, match=r"'x'.*rows 0 and 2"):
        tasks_from_rows(rows, id="id")


@pytest.mark.parametrize(("rows", "pattern"), [
    ([{"question": 5, "answer": 1}], "row 0: the prompt must be a string"),
    ([["not", "a", "dict"]], "row 0: expected a dict"),
    ([{"id": None, "question": "q", "answer": 1}], "row 0: id field"),
    ([{"id": "", "question": "q", "answer": 1}], "row 0: task id must not be empty"),
])
def test_malformed_rows_are_clear_errors(rows: list[Any], pattern: str) -> None:
    with pytest.raises(DataError, match=pattern):
        tasks_from_rows(rows, id="id" if "id" in pattern or "task id" in pattern else None)


def test_check_unique_passes_unique_sets_through() -> None:
    tasks = [Task("a", "1"), Task("b", "2")]
    assert check_unique(iter(tasks)) == tasks
    with pytest.raises(DataError, match="'a' appears twice"):
        check_unique([*tasks, Task("a", "3")])
