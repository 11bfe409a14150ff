"""`runtime.shown`: a change that holds its origin task's input and gold answer is recognised as showing it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from agentgrad.core.diff import Diff
from agentgrad.core.ops import Op
from agentgrad.data.task import Task
from agentgrad.runtime.engine import Engine
from agentgrad.runtime.shown import MIN_INPUT, SHOWN_INPUT, shows_answer
from agentgrad.strategies.demos import Demonstrations, demo_from_failure
from agentgrad.testing.agents import WorldAgent
from tests.runtime.helpers import on_engine


def test_a_demonstration_of_the_origin_task_shows_its_answer() -> None:
    task = Task("t1", 'My card was charged "twice" for one order', "KTR-4")
    demo = demo_from_failure(task)
    assert demo is not None
    lines = [op.new for op in Demonstrations().ops(demo, "") if op.new]
    assert shows_answer(lines, task.input, task.expected)


def test_a_rule_without_the_input_or_without_the_gold_does_not_show_the_answer() -> None:
    question = "My card was charged twice for one order"
    assert not shows_answer(["- card charges go to KTR-4"], question, "KTR-4")
    assert not shows_answer([f'Input: {question}\nAnswer: MZV-2'], question, "KTR-4")
    assert not shows_answer([f'Input: {question}\nAnswer: KTR-4'], question, None)


def test_only_the_start_of_a_long_input_is_looked_for_case_and_punctuation_aside() -> None:
    question = "word " * 100
    shown = "INPUT: " + "Word, " * (SHOWN_INPUT // 4 + 1) + " answer: 42"
    assert shows_answer([shown], question, 42)
    assert not shows_answer(["word " * 5 + " 42"], question, 42)


def test_a_short_input_is_never_taken_as_shown() -> None:
    assert not shows_answer(["## refunds\nsee policy 2"], "refunds", "see policy 2")
    question = "x" * MIN_INPUT
    assert shows_answer([f"{question} -> 7"], question, 7)
    assert not shows_answer([f"{question[1:]} -> 7"], question[1:], 7)


def test_the_engine_takes_a_change_as_showing_its_origin_only_when_no_other_task_starts_alike(tmp_path: Path) -> None:
    async def body(engine: Engine, bot: WorldAgent) -> None:
        tasks = dict(engine.tasks)
        engine.tasks = tasks
        origin, other = sorted(tasks)[:2]
        question = "a question long enough to be looked for, about order 1234"
        tasks[origin] = replace(tasks[origin], input=question, expected="KTR-4")
        tasks[other] = replace(tasks[other], input="another question of its own, about refunds")
        diff = Diff("skill", 0, (Op.add("key", f'example-0123456789: "{question}" -> "KTR-4"'),))
        assert engine.shows_origin(diff, origin) and not engine.shows_origin(diff, other)
        assert not engine.shows_origin(diff, None)
        engine.input_starts.clear()
        tasks[other] = replace(tasks[other], input=question)
        assert not engine.shows_origin(diff, origin)

    on_engine(tmp_path / "run", body)
