"""LLMAgent: the skill goes in the system message; edits are validated, repaired once, then refused; the one-rule
scaffold shows worked examples, a computed comparison and earlier expected answers, and seeds every call."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import pytest

from agentgrad.agents.edits import RULE_SCHEMA
from agentgrad.agents.llm import LLMAgent, Proposal, closest_rule, compare, load_prompt, parse_examples
from agentgrad.data.task import Task
from agentgrad.errors import ConfigError, InvalidProposalError, StateDictError
from agentgrad.providers.base import Completion, Message, Usage
from agentgrad.providers.callable import CallableProvider
from agentgrad.strategies.base import make_diff
from agentgrad.strategies.rules import AppendRules

TASK = Task("t1", "Great film, loved it.", "positive")


class Script:
    """A fake model that answers from a list of replies and records every conversation it saw."""

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)
        self.seen: list[list[Message]] = []

    def __call__(self, messages: Sequence[Message], **params: Any) -> str:
        self.seen.append(list(messages))
        return self.replies.pop(0)


def test_run_puts_the_skill_in_the_system_message_and_the_task_in_the_user_message() -> None:
    model = Script("positive")
    agent = LLMAgent(CallableProvider(model))
    completion = anyio.run(agent.run, "Reply with one word.", TASK)
    assert completion.text == "positive"
    assert [(m.role, m.content) for m in model.seen[0]] == [("system", "Reply with one word."),
                                                            ("user", TASK.input)]


def test_an_empty_skill_sends_no_system_message() -> None:
    model = Script("ok")
    anyio.run(LLMAgent(CallableProvider(model)).run, "  ", TASK)
    assert [m.role for m in model.seen[0]] == ["user"]


def test_propose_shows_the_failure_and_returns_validated_edits() -> None:
    model = Script('{"edits": [{"action": "add", "content": "Answer with one lowercase word."}]}')
    edits = anyio.run(LLMAgent(CallableProvider(model)).propose, "", TASK, "It is a positive review!", 0.0).text
    assert edits == [{"action": "add", "content": "Answer with one lowercase word."}]
    prompt = model.seen[0][0].content
    assert TASK.input in prompt and "It is a positive review!" in prompt and "positive" in prompt


def test_a_malformed_proposal_gets_one_repair_attempt() -> None:
    model = Script("I think you should add a rule.", '{"edits": [{"action": "add", "content": "Be brief."}]}')
    edits = anyio.run(LLMAgent(CallableProvider(model)).propose, "", TASK, "x", 0.0).text
    assert edits == [{"action": "add", "content": "Be brief."}]
    assert len(model.seen) == 2 and "could not be used" in model.seen[1][-1].content


def test_a_proposal_malformed_twice_is_a_recorded_failure() -> None:
    model = Script("nope", "still nope")
    with pytest.raises(InvalidProposalError, match="twice"):
        anyio.run(LLMAgent(CallableProvider(model)).propose, "", TASK, "x", 0.0)
    assert len(model.seen) == 2


def test_repair_shows_the_current_skill_and_the_stale_edit() -> None:
    model = Script('{"edits": []}')
    diff = {"ops": [{"action": "add", "new": "- be brief", "old": None}]}
    assert anyio.run(LLMAgent(CallableProvider(model)).repair, diff, "- cite sources").text == []
    assert "- cite sources" in model.seen[0][0].content and "be brief" in model.seen[0][0].content


def test_prompts_live_in_files() -> None:
    assert "{skill}" in load_prompt("reflect") and "{edit}" in load_prompt("repair")


def test_proposal_usage_covers_the_repair_attempt_too() -> None:
    replies = iter([Completion("not json", Usage(10, 5, 0.01), 0.0, "m"),
                    Completion('{"edits": [{"action": "add", "content": "Be brief."}]}', Usage(20, 7, 0.02), 0.0, "m")])

    def model(messages: Sequence[Message], **params: Any) -> Completion:
        return next(replies)

    proposal = anyio.run(LLMAgent(CallableProvider(model)).propose, "", TASK, "x", 0.0)
    assert (proposal.usage.input_tokens, proposal.usage.output_tokens) == (30, 12)
    assert proposal.usage.cost == pytest.approx(0.03)


# --- the one-rule scaffold ------------------------------------------------------------------------------------

class Recorder:
    """A fake model that replies with a fixed text and records every conversation and its params."""

    def __init__(self, reply: str = '{"rule": "Answer with one word: positive or negative."}') -> None:
        self.reply = reply
        self.seen: list[tuple[list[Message], dict[str, Any]]] = []

    def __call__(self, messages: Sequence[Message], **params: Any) -> str:
        self.seen.append((list(messages), params))
        return self.reply


def rule_agent(model: Recorder, **kwargs: Any) -> LLMAgent:
    return LLMAgent(CallableProvider(model), style="rule", reflect_params={"json_schema": RULE_SCHEMA}, **kwargs)


def test_the_rule_scaffold_shows_worked_examples_as_turns_then_the_case() -> None:
    model = Recorder()
    proposal = anyio.run(rule_agent(model).propose, "", TASK, "What a lovely film it was!", 0.0)
    assert proposal.text == "Answer with one word: positive or negative."
    messages, params = model.seen[0]
    examples = parse_examples(load_prompt("reflect_rule_examples"))
    assert [m.role for m in messages] == ["system", *["user", "assistant"] * len(examples), "user"]
    assert messages[2].content == '{"rule": "' + examples[0].rule + '"}'
    case = messages[-1].content
    assert TASK.input in case and "What a lovely film it was!" in case and "Expected answer: positive" in case
    assert "Current instructions: (none)" in case
    assert params["json_schema"] == RULE_SCHEMA


def test_a_rule_that_copies_a_worked_example_is_a_recorded_failure() -> None:
    example = parse_examples(load_prompt("reflect_rule_examples"))[-1].rule
    with pytest.raises(InvalidProposalError, match="only repeats"):
        anyio.run(rule_agent(Recorder('{"rule": "' + example + '"}')).propose, "", TASK, "x y z", 0.0)


def test_a_rule_that_is_just_the_expected_answer_or_the_output_is_refused() -> None:
    task = Task("t3", "Which planet is called red?", "Mars, the red planet")
    for reply in ('{"rule": "mars, the red planet."}', '{"rule": "It is Mars of course"}'):
        with pytest.raises(InvalidProposalError, match="only repeats"):
            anyio.run(rule_agent(Recorder(reply)).propose, "", task, "It is Mars of course", 0.0)


def test_each_proposal_call_carries_the_next_seed() -> None:
    model = Recorder()
    agent = rule_agent(model, seed=7)
    for _ in range(3):
        anyio.run(agent.propose, "", TASK, "x", 0.0)
    assert [params["seed"] for _, params in model.seen] == [7, 8, 9]
    unseeded = Recorder()
    anyio.run(rule_agent(unseeded).propose, "", TASK, "x", 0.0)
    assert "seed" not in unseeded.seen[0][1]


def answers_line(messages: list[Message]) -> str:
    return next(line for line in messages[-1].content.splitlines() if line.startswith("Expected answers"))


def test_earlier_expected_answers_are_shown_distinct_with_this_one_first() -> None:
    model = Recorder()
    agent = rule_agent(model, shown=3)
    agent.remember(["negative", "positive", "neutral", "negative"])
    anyio.run(agent.propose, "", TASK, "x", 0.0)
    assert answers_line(model.seen[0][0]) == "Expected answers on tasks of this kind: positive, negative, neutral"
    other = Task("t2", "Awful.", "negative")
    anyio.run(agent.propose, "", other, "x", 0.0)
    assert answers_line(model.seen[1][0]).endswith(": negative, positive, neutral")


def test_the_comparison_says_how_the_answer_differs() -> None:
    assert "inside the assistant's answer" in compare("The sentiment is positive.", "positive")
    assert "wrote 9 words; the expected answer has 1" in compare("I am sorry but I cannot help with that", "no")
    assert "expected form but the wrong value" in compare("negative", "positive")
    assert "expected form but the wrong value" in compare("2012-03-01", "2012-01-03")
    assert "wrong content or form" in compare("2012/01/03", "2012-01-03")
    assert "failed" in compare(None, "positive")
    assert "4 words where 1 is expected" in compare("it is 53 exactly", 53)


def test_state_round_trips_and_bad_state_changes_nothing() -> None:
    agent = rule_agent(Recorder(), seed=0)
    agent.remember(["negative", "neutral"])
    anyio.run(agent.propose, "", TASK, "x", 0.0)
    copy = rule_agent(Recorder(), seed=0)
    copy.load_state_dict(agent.state_dict())
    assert copy.state_dict() == agent.state_dict() == {"calls": 1, "answers": ["negative", "neutral", "positive"]}
    with pytest.raises(StateDictError):
        copy.load_state_dict({"calls": -1, "answers": []})
    assert copy.state_dict()["calls"] == 1


def test_rule_style_repair_re_adds_the_stale_rules_without_a_call() -> None:
    model = Recorder()
    diff = {"ops": [{"action": "add", "new": "- Answer in one word.", "old": None}]}
    assert anyio.run(rule_agent(model).repair, diff, "- other") == Proposal("- Answer in one word.")
    assert model.seen == []


def test_unknown_styles_and_bad_examples_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="style"):
        LLMAgent(CallableProvider(Recorder()), style="poem")
    with pytest.raises(ConfigError, match="lacks"):
        parse_examples("## Example\nskill: (none)\ninput: q\nrule: r\n")
    with pytest.raises(ConfigError, match="no worked example"):
        parse_examples("nothing here")


def test_edits_prompts_also_show_earlier_expected_answers() -> None:
    model = Script('{"edits": [{"action": "add", "content": "Be brief."}]}')
    agent = LLMAgent(CallableProvider(model))
    agent.remember(["negative"])
    anyio.run(agent.propose, "", TASK, "x", 0.0)
    assert "(this one first): positive, negative" in model.seen[0][0].content


SKILL = "- Be polite.\n- Answer with only one word: positive."


def test_a_rule_much_like_one_of_the_skill_is_proposed_as_its_replacement() -> None:
    model = Recorder('{"rule": "Answer with only one word: positive or negative."}')
    proposal = anyio.run(rule_agent(model).propose, SKILL, TASK, "negative", 0.0)
    assert proposal.text == [{"action": "replace", "target": "Answer with only one word: positive.",
                              "content": "Answer with only one word: positive or negative."}]
    strategy = AppendRules()
    diff = make_diff(strategy, "skill", 0, SKILL, proposal.text)
    assert [op.action.value for op in diff.ops] == ["replace"]


def test_an_unlike_rule_is_added_and_refine_none_always_adds() -> None:
    unlike = Recorder('{"rule": "Ignore the tone of the first sentence."}')
    assert anyio.run(rule_agent(unlike).propose, SKILL, TASK, "negative", 0.0).text == \
        "Ignore the tone of the first sentence."
    like = Recorder('{"rule": "Answer with only one word: positive or negative."}')
    assert isinstance(anyio.run(rule_agent(like, refine=None).propose, SKILL, TASK, "negative", 0.0).text, str)


def test_closest_rule_skips_headings_and_the_same_rule() -> None:
    skill = "# Rules\n- Answer with only one word: positive."
    assert closest_rule(skill, "Answer with only one word: POSITIVE", 0.6) is None
    assert closest_rule(skill, "Answer with only one word: negative.", 0.6) == "Answer with only one word: positive."
    assert closest_rule(skill, "Answer with only one word: negative.", 0.9) is None


def test_a_rule_naming_one_answer_is_refused_once_others_were_shown() -> None:
    agent = rule_agent(Recorder('{"rule": "Answer with only one word: positive."}'))
    assert anyio.run(agent.propose, "", TASK, "x", 0.0).text == "Answer with only one word: positive."
    agent.remember(["negative"])
    with pytest.raises(InvalidProposalError, match=r"none of the others shown \(negative\)"):
        anyio.run(agent.propose, "", TASK, "x", 0.0)

