"""Demonstrations: examples are keyed by their input, capped, cut, rendered for the solver, and learned by `evolve`."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from agentgrad.core.diff import apply, apply_ops, invert
from agentgrad.core.ops import Action, Op
from agentgrad.core.units import Scope
from agentgrad.data.splits import Splits
from agentgrad.data.task import Task
from agentgrad.errors import ConfigError, InvalidProposalError
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.evolve import evolve
from agentgrad.strategies import (
    AppendRules,
    Demonstrations,
    Example,
    demo_from_failure,
    examples,
    make_diff,
    propose_demo,
)
from agentgrad.strategies.demos import example_key, read_line

DEMOS = Demonstrations()
SKILL = "# Routing\n- Answer with the queue code only.\n"
CARD = "Input: My card was charged twice\nAnswer: KTR-4"


def learn(text: str, proposal: Any, strategy: Demonstrations = DEMOS) -> str:
    return apply_ops(text, strategy.ops(proposal, text))


def test_an_example_becomes_one_keyed_line_that_applies_cleanly() -> None:
    ops = DEMOS.ops(CARD, SKILL)
    line = example_key("My card was charged twice") + ': "My card was charged twice" -> "KTR-4"'
    assert ops == (Op.add(Scope.KEY, line),)
    assert apply_ops(SKILL, ops) == SKILL + line + "\n"
    assert examples(apply_ops(SKILL, ops)) == [Example("My card was charged twice", "KTR-4")]
    diff = make_diff(DEMOS, "skill", 0, SKILL, CARD)
    assert apply(invert(diff, SKILL), apply(diff, SKILL)) == SKILL


def test_the_solver_sees_the_examples_gathered_under_one_heading() -> None:
    text = learn(SKILL, f"{CARD}\nInput: Where is my parcel?\nAnswer: MZV-2")
    text = learn(text, "- Say nothing else.")
    assert DEMOS.render(text) == (
        "# Routing\n- Answer with the queue code only.\n- Say nothing else.\n\n## Examples\n\n"
        "Input: My card was charged twice\nAnswer: KTR-4\n\nInput: Where is my parcel?\nAnswer: MZV-2\n")
    assert DEMOS.render(SKILL) == SKILL  # no examples: the text as it is


def test_what_the_solver_sees_reads_back_as_the_same_examples() -> None:
    text = learn(SKILL, f"{CARD}\nInput: Where is my parcel?\nAnswer: MZV-2")
    assert DEMOS.ops(DEMOS.render(text), text) == ()


def test_the_same_input_is_never_added_twice_and_a_new_answer_replaces_the_old() -> None:
    text = learn(SKILL, CARD)
    assert DEMOS.ops(CARD, text) == ()
    assert DEMOS.ops("Input:   My card was\n charged   twice\nAnswer: KTR-4", text) == ()  # white space aside
    corrected = learn(text, "Input: My card was charged twice\nAnswer: HWF-9")
    assert examples(corrected) == [Example("My card was charged twice", "HWF-9")]
    assert len(corrected.split("\n")) == len(text.split("\n"))


def test_at_the_cap_an_add_also_drops_the_oldest_example() -> None:
    small = Demonstrations(max_examples=2)
    text = learn(SKILL, "Input: a\nAnswer: 1\nInput: b\nAnswer: 2", small)
    ops = small.ops("Input: c\nAnswer: 3", text)
    assert [op.action for op in ops] == [Action.DELETE, Action.ADD]
    assert [e.input for e in examples(apply_ops(text, ops))] == ["b", "c"]
    assert [e.input for e in examples(learn(SKILL, "\n".join(f"Input: q{i}\nAnswer: {i}" for i in range(5)),
                                            small))] == ["q3", "q4"]


def test_long_inputs_are_cut_and_keyed_by_the_cut_text() -> None:
    strategy = Demonstrations(max_input=20)
    text = learn("", "Input: " + "word " * 50 + "\nAnswer: X", strategy)
    (example,) = examples(text)
    assert len(example.input) == 20 and example.input.endswith("…")
    assert strategy.ops("Input: " + "word " * 80 + "\nAnswer: X", text) == ()  # same cut, same example


def test_two_answers_for_one_input_contradict() -> None:
    first, = DEMOS.ops(CARD, SKILL)
    other, = DEMOS.ops("Input: My card was charged twice\nAnswer: HWF-9", SKILL)
    again, = DEMOS.ops(CARD, "")
    parcel, = DEMOS.ops("Input: Where is my parcel?\nAnswer: HWF-9", SKILL)
    assert DEMOS.contradicts(first, other) and DEMOS.contradicts(other, first)
    assert not DEMOS.contradicts(first, again) and not DEMOS.contradicts(other, parcel)
    assert DEMOS.contradicts(Op.add(Scope.RULE, "- never guess"), Op.add(Scope.RULE, "- always guess"))


def test_rules_and_examples_share_one_proposal_and_one_text() -> None:
    proposal = f"## Rules\n- Never explain the code.\n\n## Examples\n{CARD}\n"
    ops = DEMOS.ops(proposal, SKILL)
    assert [(op.scope, op.action) for op in ops] == [(Scope.KEY, Action.ADD), (Scope.RULE, Action.ADD)]
    text = apply_ops(SKILL, ops)
    assert examples(text) == [Example("My card was charged twice", "KTR-4")]
    negated = learn(text, "- Always explain the code.")  # the rules strategy's negation still replaces in place
    assert "- Always explain the code." in negated and "Never explain" not in negated
    rules_only = AppendRules().ops("- be brief", text)  # example lines are not rules to AppendRules
    assert apply_ops(text, rules_only).count("example-") == 1


def test_examples_go_after_an_examples_heading_then_after_the_last_example() -> None:
    text = learn("## Examples\n\n# Tone\n- Be brief.\n", CARD)
    assert text.split("\n")[1].startswith("example-")
    text = learn(text, "Input: b\nAnswer: 2")
    assert [line[:8] for line in text.split("\n")[1:3]] == ["example-", "example-"]


def test_dicts_and_structured_edits_address_examples_by_input() -> None:
    text = learn(SKILL, {"a": "1", "b": "2"})
    assert learn(text, {"a": None}) == learn(SKILL, {"b": "2"})
    assert examples(learn(text, [{"action": "delete", "target": "Input: b"}])) == [Example("a", "1")]
    renamed = learn(text, {"action": "replace", "target": "a", "content": "Input: c\nAnswer: 3"})
    assert examples(renamed) == [Example("c", "3"), Example("b", "2")]
    key = example_key("b")
    assert examples(learn(text, {"action": "delete", "target": key})) == [Example("a", "1")]


@pytest.mark.parametrize(("proposal", "message"), [
    ("Input: where is it?", "^demonstrations: the example .* no .Answer:. line"),
    ("Input: a\nInput: b\nAnswer: c", "no 'Answer:' line"),
    ("Answer: KTR-4", "no 'Input:' line"),
    ("Input: a\nAnswer:  ", "empty answer"),
    ("Input:\nAnswer: x", "non-empty input"),
    ("Input: a\nAnswer: " + "x" * 201, "limit is 200"),
    ("## Examples\n\n", "no examples and no rules"),
    ({"a": 3}, "must be a string or None"),
    ({"action": "add", "content": "- a rule"}, "not exactly one example"),
    ({"action": "delete", "target": "unknown input"}, "not in the artifact"),
])
def test_malformed_demonstrations_are_refused(proposal: Any, message: str) -> None:
    with pytest.raises(InvalidProposalError, match=message):
        DEMOS.ops(proposal, SKILL)


def test_limits_are_validated() -> None:
    for bad in ({"max_examples": 0}, {"max_input": -1}, {"max_answer": True}, {"max_chars": 0}):
        with pytest.raises(ConfigError):
            Demonstrations(**bad)


def test_a_line_that_only_looks_like_an_example_is_not_one() -> None:
    assert read_line('example-0123456789: "a" ->') is None
    assert read_line('example-0123456789: "a" -> 3') is None
    assert read_line("example: a -> b") is None


def test_a_failed_task_with_gold_becomes_one_demonstration() -> None:
    task = Task("t1", "Where is\nmy parcel?", "MZV-2")
    assert demo_from_failure(task, "KTR-4", 0.0) == "Input: Where is my parcel?\nAnswer: MZV-2"
    assert demo_from_failure(Task("t2", "2 + 2?", 4), "5", 0.0) == "Input: 2 + 2?\nAnswer: 4"
    assert demo_from_failure(Task("t3", "no gold"), "x", 0.0) is None
    assert demo_from_failure(task, "MZV-2", 1.0) is None
    assert demo_from_failure(Task("t4", "q", "x" * 300), "", 0.0) is None
    assert propose_demo("rendered skill", task, None, 0.0) == demo_from_failure(task)


MESSAGES = {"My card was charged twice": "KTR-4", "Where is my parcel?": "MZV-2", "I forgot my password": "JNB-3",
            "Please close my account": "DGY-1"}


def _tasks(copies: range) -> tuple[Task, ...]:
    """Each message arrives once per copy: the same input under many task ids."""
    return tuple(Task(f"m{i}-c{c}", text, code) for c in copies for i, (text, code) in enumerate(MESSAGES.items()))


def _answer_from_examples(rendered: str, task: Task) -> str:
    """A toy solver with no knowledge: right only when the skill shows this exact input."""
    found = re.search(rf"^Input: {re.escape(task.input)}\nAnswer: (.+)$", rendered, flags=re.MULTILINE)
    return found.group(1) if found else "unknown"


def test_evolve_learns_demonstrations_without_a_model(tmp_path: Path) -> None:
    splits = Splits(_tasks(range(2)), _tasks(range(2, 10)), _tasks(range(10, 16)), "by copy")
    result = evolve(splits, lambda task, output: float(output == task.expected), run=_answer_from_examples,
                    propose=propose_demo, strategy=Demonstrations(), artifact=SKILL, asynchronous=False,
                    budget=Budget(rollouts=24, proposals=12, gate_evals=300), store=tmp_path / "run", seed=1)
    assert result.ok, result.error
    assert result.baseline_test_reward == 0.0
    assert result.test_reward is not None and result.test_reward > 0.5
    learned = examples(result.artifact.text)
    assert learned and all(MESSAGES[e.input] == e.answer for e in learned)
    assert result.artifact.text.startswith(SKILL)
