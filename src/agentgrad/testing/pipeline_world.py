"""A three-stage pipeline world (extract -> solve -> format) for pipeline mode (`agentgrad.agents.pipeline`).

Each stage reads one artifact of a library and does its job only once its artifact holds the stage's rule:
extract keeps the text after the colon, solve adds the numbers, format says ``answer:``. Every task carries each
stage's reference output in ``meta["stages"]``, so a failure is blamed on the earliest stage that is wrong on a
correct input; the scripted fix writes that stage's rule.
"""

from __future__ import annotations

from typing import Any

from agentgrad.agents.pipeline import Blame, Pipeline, PipelineStage
from agentgrad.core.artifact import Artifact, Kind
from agentgrad.core.library import Library
from agentgrad.data.task import Task

RULES = {"extract": "- keep the text after the colon", "solve": "- add the numbers", "format": "- say answer:"}


def extract(text: str, value: Any) -> str:
    return str(value).split(":", 1)[1].strip() if RULES["extract"] in text and ":" in str(value) else str(value)


def solve(text: str, value: Any) -> str:
    if RULES["solve"] not in text:
        return str(value)
    try:
        return str(sum(int(x) for x in str(value).split("+")))
    except ValueError:
        return "?"


def present(text: str, value: Any) -> str:
    return f"answer: {value}" if RULES["format"] in text else str(value)


PIPELINE = Pipeline((PipelineStage("extract", extract), PipelineStage("solve", solve),
                     PipelineStage("format", present)))


def tasks(n: int = 36) -> list[Task]:
    """`n` sums to compute, each with its stages' reference outputs."""
    out = []
    for i in range(n):
        a, b = i % 7 + 1, i % 5 + 2
        stages = {"extract": f"{a}+{b}", "solve": str(a + b), "format": f"answer: {a + b}"}
        out.append(Task(f"t{i:02d}", f"please compute: {a}+{b}", f"answer: {a + b}", meta={"stages": stages}))
    return out


def library() -> Library:
    """The three stages' artifacts, empty."""
    return Library.of([Artifact("extract", Kind.SKILL, ""), Artifact("solve", Kind.SKILL, ""),
                       Artifact("format", Kind.PROMPT, "")])


def fix(blame: Blame) -> str:
    """The scripted proposal for a blamed stage: its rule."""
    return RULES[blame.stage]


def score(task: Task, output: Any) -> float:
    return 1.0 if output == task.expected else 0.0
