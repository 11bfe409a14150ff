"""Small task sets shipped with agentgrad, for examples, smoke tests and benchmarks.

- ``sentiment``: 60 short movie and product reviews, gold ``"positive"`` or ``"negative"`` (30 each);
  score with ``normalized_exact``.
- ``arithmetic``: 60 questions ``What is A op B?`` with two-digit A, B and op in +, -, × (20 each), integer gold;
  score with ``numeric``.
- ``dates``: 60 dates in ten written styles (``March 5, 2021``, ``05/03/2021 (day first)``, ``5th of March
  2021``...), gold in ISO 8601 ``YYYY-MM-DD``; score with ``normalized_exact``.
- ``routing``: 92 short customer-support messages, gold a queue code such as ``KTR-4`` (billing) or ``MZV-2``
  (delivery): arbitrary codes a model cannot guess without being told or shown them. Eight queues of unequal,
  Zipf-like sizes (32, 17, 12, 9, 7, 6, 5, 4); the queue's name is in ``Task.meta["queue_name"]``; score with
  ``normalized_exact``.

Each file is JSON Lines with ``id``, ``question``, ``answer`` and extra fields that land in `Task.meta`.
"""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING

from agentgrad.data.errors import DataUnavailableError
from agentgrad.data.loaders import parse_jsonl
from agentgrad.data.task import Task, tasks_from_rows

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable


def _folder() -> Traversable:
    folder = resources.files("agentgrad.data").joinpath("sets")
    if not folder.is_dir():
        raise DataUnavailableError("the shipped task sets are missing from this installation "
                                   "(package data agentgrad/data/sets/*.jsonl was not installed)")
    return folder


def available_sets() -> list[str]:
    """The names of the shipped sets, sorted."""
    return sorted(entry.name.removesuffix(".jsonl") for entry in _folder().iterdir()
                  if entry.name.endswith(".jsonl"))


def load_set(name: str) -> list[Task]:
    """The tasks of a shipped set, in file order; an unknown name is a `DataUnavailableError` listing the sets."""
    names = available_sets()
    if name not in names:
        raise DataUnavailableError(f"no shipped task set {name!r}; available: {names}")
    text = _folder().joinpath(f"{name}.jsonl").read_text(encoding="utf-8")
    return tasks_from_rows(parse_jsonl(text, source=f"shipped set {name!r}"), prompt="question", gold="answer",
                           id="id")


def recommended_scorer(name: str) -> str:
    """The name of the scorer to use on a shipped set (pass it to `get_scorer`)."""
    scorers = {"sentiment": "normalized_exact", "arithmetic": "numeric", "dates": "normalized_exact",
               "routing": "normalized_exact"}
    if name not in scorers:
        raise DataUnavailableError(f"no shipped task set {name!r}; available: {sorted(scorers)}")
    return scorers[name]
