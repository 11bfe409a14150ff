"""A stand-in for a model on the shipped ``routing`` set, for offline tests of the recipes (no model, no key).

The routing set asks for the code of the queue a support ticket belongs to (``KTR-4`` for billing, ...), with
skewed labels (billing is a third of the set, bulk orders one in twenty). The stand-in solver "understands" which
queue a ticket is about (it reads ``task.meta["queue_name"]``) but knows a queue's code only when its instructions
say it, as a line naming the queue (``_`` or space) and the code: ``- billing tickets go to KTR-4``. Without one it
answers ``unknown``; a line that names a code for the wrong queue misleads it.

`lessons` plays a reflector: from any prompt that quotes failed tickets with their expected codes (the way the
recipes' prompts do), it finds the lessons a good model would draw, one per queue, so a scripted provider can
answer each recipe in its own format.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from agentgrad.data.shipped import load_set
from agentgrad.data.task import Task

_CODE = re.compile(r"\b[A-Z]{3}-\d\b")


def tasks() -> list[Task]:
    """The routing set's tasks."""
    return load_set("routing")


def queues() -> dict[str, str]:
    """Each queue's code, as the set has it."""
    return {str(t.meta["queue_name"]): str(t.expected) for t in tasks()}


def rule(queue: str, code: str) -> str:
    """The instruction line that teaches one queue's code."""
    return f"- {queue.replace('_', ' ')} tickets go to {code}"


def solve(instructions: str | Mapping[str, str], task: Task) -> str:
    """The stand-in's answer: the code the instructions give for the ticket's queue (the last such line wins)."""
    text = instructions if isinstance(instructions, str) else "\n".join(instructions.values())
    queue = str(task.meta.get("queue_name", ""))
    names = {queue, queue.replace("_", " ")}
    answer = "unknown"
    for line in text.splitlines():
        lowered = line.lower()
        codes = _CODE.findall(line)
        if codes and any(re.search(rf"\b{re.escape(n)}\b", lowered) for n in names):
            answer = codes[-1]
    return answer


def score(task: Task, output: Any) -> float:
    """1 for the right code, else 0."""
    return 1.0 if str(output).strip() == str(task.expected) else 0.0


def lessons(prompt: str, known: Sequence[Task] | None = None) -> list[str]:
    """The rules a good reflector would write from `prompt`: one for each queue whose ticket the prompt quotes."""
    found: dict[str, str] = {}
    for task in known if known is not None else tasks():
        if task.input in prompt:
            found[str(task.meta["queue_name"])] = str(task.expected)
    return [rule(queue, code) for queue, code in sorted(found.items())]
