"""A world for section-parallel mode (`agentgrad.runtime.sections`): one markdown playbook, a section a topic.

Each task names its topic's section (``meta["section"]``); the scripted agent answers with the first line of that
section, and the scripted proposer writes the section with the right answer.
"""

from __future__ import annotations

from typing import Any

from agentgrad.data.task import Task

TOPICS = ("billing", "refunds", "shipping", "returns", "accounts", "privacy", "warranty", "coupons")


def tasks(n: int = 48) -> list[Task]:
    """`n` tasks over the topics, each naming its section."""
    return [Task(f"t{i:02d}", TOPICS[i % len(TOPICS)], f"see policy {i % len(TOPICS) + 1}",
                 meta={"section": TOPICS[i % len(TOPICS)]}) for i in range(n)]


def run(text: str, task: Task) -> str:
    heading = f"## {task.input}\n"
    start = text.find(heading)
    return "" if start < 0 else text[start + len(heading):].split("\n", 1)[0]


def reward(task: Task, output: Any) -> float:
    return 1.0 if output == task.expected else 0.0


def propose(text: str, task: Task, output: Any, score: float) -> str:
    return f"## {task.input}\n{task.expected}"
