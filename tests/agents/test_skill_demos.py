"""evolve_skill(proposer="demos" / "demos+rules"): worked examples from failures, with no strong model.

The fake model routes a message to its queue's code only when the conversation before it shows a message of the
same queue; it never guesses a code. Asked for a rule, it writes one that fixes greetings, which no example does.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentgrad.agents.demo_agent import DemoAgent, answer_grammar, demo_messages
from agentgrad.agents.skill import evolve_skill, make_agent
from agentgrad.core.diff import apply_ops
from agentgrad.data.task import Task
from agentgrad.errors import ConfigError
from agentgrad.providers.base import Message
from agentgrad.providers.callable import CallableProvider
from agentgrad.runtime.budget import Budget
from agentgrad.strategies.demos import Demonstrations, examples

QUEUES = {"invoice": "KTR-4", "parcel": "MZV-2", "password": "JNB-3", "refund": "HWF-9"}
RULE = "Write greetings back in capital letters."
ROUTED = [{"question": f"message {i}: a question about my {word}", "answer": QUEUES[word]}
          for i, word in enumerate(list(QUEUES) * 12)]
GREETINGS = [{"question": f"greeting {i}: hello there", "answer": "HELLO"} for i in range(16)]


class Fake:
    """The fake model; counts the proposal (rule) calls it was asked."""

    def __init__(self) -> None:
        self.rule_calls = 0

    def __call__(self, messages: Sequence[Message], **params: Any) -> str:
        if messages[0].content.startswith("You write instructions"):
            self.rule_calls += 1
            return json.dumps({"rule": RULE})
        question, before = messages[-1].content, " ".join(m.content for m in messages[:-1])
        if "hello" in question:
            return "HELLO" if RULE in before else "hello"
        word = next(w for w in QUEUES if w in question)
        return QUEUES[word] if word in before else "I do not know that queue."


def test_demonstrations_raise_held_out_accuracy_with_no_proposal_call(tmp_path: Path) -> None:
    fake = Fake()
    result = evolve_skill(ROUTED, model=CallableProvider(fake), score="exact", proposer="demos",
                          budget=Budget(calls=300), store=tmp_path / "run", workers=2, asynchronous=False)
    assert result.ok, result.error
    assert result.baseline_test_reward == 0.0
    assert result.test_reward is not None and result.test_reward >= 0.9
    learned = examples(result.artifact.text)
    assert learned and all(QUEUES[next(w for w in QUEUES if w in e.input)] == e.answer for e in learned)
    assert "## Examples" in result.rendered and fake.rule_calls == 0


def parrot(messages: Sequence[Message], **params: Any) -> str:
    """A model that answers a message only when that very message, and its answer, came before."""
    shown = {q.content: a.content for q, a in zip(messages[:-1:2], messages[1:-1:2], strict=False)}
    return shown.get(messages[-1].content, "I do not know that queue.")


@pytest.mark.parametrize("asynchronous", [False, True])
def test_an_example_that_only_solves_its_own_task_is_never_committed(tmp_path: Path, asynchronous: bool) -> None:
    result = evolve_skill(ROUTED, model=CallableProvider(parrot), score="exact", proposer="demos",
                          budget=Budget(calls=300), store=tmp_path / "run", workers=2, asynchronous=asynchronous)
    assert result.ok, result.error
    assert not result.accepted() and not examples(result.artifact.text)
    counts = result.counts
    assert counts.get("screened_out", 0) == 0 and counts["gated"] > 0  # each won on its origin task, nowhere else
    assert counts.get("replications", 0) == 0


def test_demos_plus_rules_learns_examples_and_the_models_rule_in_one_skill(tmp_path: Path) -> None:
    fake = Fake()
    result = evolve_skill(ROUTED + GREETINGS, model=CallableProvider(fake), score="exact", proposer="demos+rules",
                          budget=Budget(calls=300), store=tmp_path / "run", workers=2, asynchronous=False)
    assert result.ok, result.error
    assert result.test_reward is not None and result.baseline_test_reward is not None
    assert result.test_reward >= result.baseline_test_reward + 0.5
    assert examples(result.artifact.text) and RULE in result.artifact.text and fake.rule_calls >= 1


def test_examples_are_shown_as_turns_and_rules_as_the_system_message() -> None:
    rendered = Demonstrations().render(f"- {RULE}\n" + 'example-0123456789: "my invoice" -> "KTR-4"')
    messages = demo_messages(rendered, Task("t", "my parcel"))
    assert [(m.role, m.content) for m in messages] == [
        ("system", f"- {RULE}"), ("user", "my invoice"), ("assistant", "KTR-4"), ("user", "my parcel")]
    assert [m.role for m in demo_messages("", Task("t", "q"))] == ["user"]
    assert demo_messages("Input: no answer line", Task("t", "q"))[0].content == "Input: no answer line"


def test_with_rules_every_other_proposal_asks_the_model() -> None:
    fake = Fake()
    agent = DemoAgent(make_agent(CallableProvider(fake), local=True, proposer="rule"), rules=True)
    task = Task("t", "message 1: a question about my parcel", "MZV-2")

    async def four() -> list[Any]:
        return [await agent.propose("", task, "no idea", 0.0) for _ in range(4)]

    first, second, third, _ = anyio.run(four)
    assert first == third == "Input: message 1: a question about my parcel\nAnswer: MZV-2"
    assert getattr(second, "text", None) == RULE and fake.rule_calls == 2


def test_an_unknown_proposer_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="unknown proposer 'demo'"):
        evolve_skill(ROUTED, model=CallableProvider(Fake()), proposer="demo")


def _skill(pairs: Sequence[tuple[str, str]]) -> str:
    strategy, text = Demonstrations(), ""
    for shown, answer in pairs:
        text = apply_ops(text, strategy.ops(f"Input: {shown}\nAnswer: {answer}", text))
    return strategy.render(text)


def test_nearest_shows_only_the_examples_most_like_the_input_the_most_alike_last() -> None:
    rendered = _skill([("where is my parcel today", "MZV-2"), ("my invoice is wrong", "KTR-4"),
                       ("reset my password please", "JNB-3"), ("my parcel arrived broken", "HWF-9")])
    messages = demo_messages(rendered, Task("t", "the parcel never arrived"), nearest=2)
    shown = [m.content for m in messages if m.role == "user"][:-1]
    assert len(shown) == 2 and shown[-1] == "my parcel arrived broken" and "parcel" in shown[0]
    assert len(demo_messages(rendered, Task("t", "q"), nearest=9)) == 9  # 4 examples (2 turns each) and the input


def test_closed_answers_carry_a_grammar_of_the_answers_the_examples_show() -> None:
    seen: list[dict[str, Any]] = []

    def model(messages: Sequence[Message], **params: Any) -> str:
        seen.append(params)
        return "KTR-4"

    agent = DemoAgent(make_agent(CallableProvider(model), local=True, proposer="rule"), closed=True)
    rendered = _skill([("my invoice", "KTR-4"), ("my parcel", "MZV-2"), ("another invoice", "KTR-4")])
    anyio.run(agent.run, rendered, Task("t", "a question"))
    anyio.run(agent.run, "", Task("t", "a question"))
    assert seen[0]["grammar"] == 'root ::= "KTR-4" | "MZV-2"' and "grammar" not in seen[1]
    assert answer_grammar(_skill([('say "hi"', 'a "quoted" answer')])) == r'root ::= "a \"quoted\" answer"'


def test_example_options_without_a_demonstrations_proposer_are_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="proposer='demos'"):
        evolve_skill(ROUTED, model=CallableProvider(Fake()), proposer="rule", nearest=3)
    with pytest.raises(ConfigError, match="nearest"):
        DemoAgent(make_agent(CallableProvider(Fake()), local=True, proposer="rule"), nearest=0)
