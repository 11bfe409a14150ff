"""Whether a change shows its origin task's answer: a worked example of the very task it was proposed from.

A demonstration built from a failed task (`strategies.demos`) holds that task's input and its gold answer, and a
rule may quote both. A model that copies what it is shown then solves the origin task in any context, so a win
there says nothing about the change's effect on any other task. The gate never scores the origin task as
evidence (`Gate.plan` leaves it out of every plan), and a candidate that shows its origin's answer is never held
for the replication test (`optim.judge`): that test's null hypothesis, that a change with no effect elsewhere wins
on its origin task only by noise, does not hold for it, so its wins there would be accepted as evidence of nothing.
Its gain has to show on other tasks.

The check compares letters and digits only (case and everything else dropped): the first `SHOWN_INPUT` of the
origin's input and the whole of its gold answer must both occur in the text the change adds. An input shorter than
`MIN_INPUT` such characters is not looked for (a topic word, a short sum: a rule may hold it by chance), nor is one
that other tasks share: a change that shows it teaches those tasks too, and wins on them are evidence.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from agentgrad.core.diff import Diff
from agentgrad.strategies.demos import gold_text

SHOWN_INPUT = 60  # letters and digits of the origin's input that must occur in the added text
MIN_INPUT = 16  # an input with fewer letters and digits than this is never taken as shown


def _flat(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


def input_start(question: object) -> str:
    """What is looked for of an input: its first `SHOWN_INPUT` letters and digits, lower-cased."""
    return _flat(str(question))[:SHOWN_INPUT]


def shows_answer(added: Iterable[str], question: object, expected: object) -> bool:
    """True if the `added` texts hold both the start of `question` (at least `MIN_INPUT` letters and digits) and
    the whole gold answer `expected` (None: no gold, never shown)."""
    if expected is None:
        return False
    flat, gold = _flat(str(question)), _flat(gold_text(expected))
    if len(flat) < MIN_INPUT or not gold:
        return False
    text = _flat(" ".join(added))
    return flat[:SHOWN_INPUT] in text and gold in text


def shows_origin(diff: Diff, origin: str | None, tasks: Mapping[str, Any], starts: Counter[str]) -> bool:
    """True if `diff` adds its origin task's input and gold answer, and no other task of `tasks` has that input.
    `starts` counts the tasks by `input_start`: the caller keeps it, and it is filled when first needed (only once
    a change shows an answer: most runs never need it)."""
    task = None if origin is None else tasks.get(origin)
    question = getattr(task, "input", "")
    if task is None or not shows_answer((op.new for op in diff.ops if op.new), question,
                                        getattr(task, "expected", None)):
        return False
    if not starts:
        starts.update(input_start(getattr(t, "input", "")) for t in tasks.values())
    return starts[input_start(question)] == 1


__all__ = ["MIN_INPUT", "SHOWN_INPUT", "input_start", "shows_answer", "shows_origin"]
