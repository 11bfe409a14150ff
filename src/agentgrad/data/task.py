"""A task the agent is scored on, and how rows of a dataset become tasks."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from agentgrad.core._checks import is_integer, text
from agentgrad.data.errors import DataError
from agentgrad.errors import InvalidIdError

MAX_TASK_ID_LENGTH = 200

Field = str | Callable[[Mapping[str, Any]], Any]


def check_task_id(value: object) -> str:
    """Return `value` if it is a usable task id (a non-empty string of at most 200 characters, valid Unicode,
    no NUL)."""
    task_id = text(value, "task id", empty=True, error=InvalidIdError)
    if not task_id:
        raise InvalidIdError("task id must not be empty")
    if len(task_id) > MAX_TASK_ID_LENGTH:
        raise InvalidIdError(f"task id is {len(task_id)} characters long; the limit is {MAX_TASK_ID_LENGTH}")
    if "\x00" in task_id:
        raise InvalidIdError(f"task id {task_id!r} contains a NUL byte")
    try:
        task_id.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidIdError(f"task id {task_id!r} is not valid Unicode (a lone surrogate at index {exc.start}); "
                             "decode the data with errors='replace', or fix the id") from None
    return task_id


@dataclass(frozen=True)
class Task:
    """One example: what the agent sees and the gold answer a scorer compares its output with.

    Args:
        id: unique within a set (see `check_task_id`).
        input: the text the agent is given.
        expected: the gold answer (any JSON-ready value; None when the scorer needs none).
        meta: anything else about the example (source fields, labels); kept read-only.
    Hash and order use the id and input only, so `expected` and `meta` may hold lists and dicts.
    """

    id: str
    input: str
    expected: Any = field(default=None, hash=False)
    meta: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        check_task_id(self.id)
        text(self.input, f"task {self.id!r}: input", empty=True, error=DataError)
        if not isinstance(self.meta, Mapping):
            raise DataError(f"task {self.id!r}: meta must be a mapping, got {type(self.meta).__name__}")
        object.__setattr__(self, "meta", MappingProxyType(dict(self.meta)))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (if `expected` and `meta` are); `Task.from_dict` reverses it."""
        return {"id": self.id, "input": self.input, "expected": self.expected, "meta": dict(self.meta)}

    def __reduce__(self) -> tuple[Any, tuple[dict[str, Any]]]:
        """Copied to another process (`runtime.isolated.in_subprocess`) as its dict: the read-only `meta` view
        cannot be pickled itself. Only for crossing a process boundary; nothing is stored this way."""
        return (Task.from_dict, (self.to_dict(),))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Task:
        """Build a task from `to_dict` output."""
        if not isinstance(data, Mapping) or "id" not in data or "input" not in data:
            raise DataError(f"a task dict needs 'id' and 'input', got {data!r:.200}")
        return cls(data["id"], data["input"], data.get("expected"), data.get("meta", {}))


def check_unique(tasks: Iterable[Task]) -> list[Task]:
    """Return the tasks as a list, raising `DataError` naming the first id that appears twice."""
    seen: dict[str, int] = {}
    out = list(tasks)
    for index, task in enumerate(out):
        if task.id in seen:
            raise DataError(f"task id {task.id!r} appears twice (rows {seen[task.id]} and {index}); ids must be unique")
        seen[task.id] = index
    return out


def _pick(row: Mapping[str, Any], index: int, spec: Field, role: str) -> Any:
    if callable(spec):
        try:
            return spec(row)
        except (KeyError, IndexError) as exc:
            raise DataError(f"row {index}: the {role} function failed with {exc!r}; the row has fields "
                            f"{sorted(map(str, row))}") from exc
    if spec not in row:
        raise DataError(f"row {index}: no field {spec!r} (the {role}); the row has fields {sorted(map(str, row))}")
    return row[spec]


def _row_id(row: Mapping[str, Any], index: int, id_field: str | None) -> str:
    if id_field is None:
        return f"r{index:05d}"
    value = _pick(row, index, id_field, "id")
    if not (isinstance(value, str) or is_integer(value)):
        raise DataError(f"row {index}: id field {id_field!r} must be a string or an int, got {value!r:.80}")
    return str(value)


def _one_task(row: object, index: int, prompt: Field, gold: Field | None, id_field: str | None) -> Task:
    if not isinstance(row, Mapping):
        raise DataError(f"row {index}: expected a dict, got {type(row).__name__}")
    task_id = _row_id(row, index, id_field)
    text = _pick(row, index, prompt, "prompt")
    if not isinstance(text, str):
        raise DataError(f"row {index}: the prompt must be a string, got {type(text).__name__} {text!r:.80}")
    expected = None if gold is None else _pick(row, index, gold, "gold")
    used = {f for f in (prompt, gold, id_field) if isinstance(f, str)}
    meta = {k: v for k, v in row.items() if k not in used}
    try:
        return Task(task_id, text, expected, meta)
    except InvalidIdError as exc:
        raise DataError(f"row {index}: {exc}") from exc


def tasks_from_rows(rows: Iterable[Mapping[str, Any]], *, prompt: Field = "question", gold: Field | None = "answer",
                    id: str | None = None) -> list[Task]:
    """Turn dataset rows into tasks.

    Args:
        rows: dicts, e.g. from `load_jsonl`.
        prompt: the field holding the input text, or a function row -> text.
        gold: the field holding the gold answer, or a function row -> answer; None for no gold.
        id: the field holding a unique id; when None, ids are ``r00000``, ``r00001``... by position.
    The row's other fields go to `Task.meta`. A missing field, a non-text prompt or a repeated id raises
    `DataError` naming the row.

    >>> tasks_from_rows([{"question": "2+2?", "answer": 4}])[0].id
    'r00000'
    """
    return check_unique(_one_task(row, index, prompt, gold, id) for index, row in enumerate(rows))
