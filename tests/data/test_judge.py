"""The LLM judge with a fake `complete`: what it is asked, how replies are read, and garbage raising."""

from __future__ import annotations

from typing import Any

import pytest

from agentgrad.data import JudgeError, get_scorer, llm_judge, parse_score
from agentgrad.errors import ConfigError


class FakeModel:
    """Replies with a canned text and remembers the prompts it was sent."""

    def __init__(self, reply: Any) -> None:
        self.reply = reply
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> Any:
        self.prompts.append(prompt)
        return self.reply


@pytest.mark.parametrize(("reply", "score"), [
    ("0.8", 0.8),
    ("Score: 0.7", 0.7),
    ("The answer misses one fact.\nScore: 8/10", 0.8),
    ("**Score:** 0.9", 0.9),
    ("score = 1", 1.0),
    ("Rating: 80%", 0.8),
    ("Good.\n0.6\n", 0.6),
    ("Score: 7 out of 10", 0.7),
    ("It names 2 of the 3 facts.\nScore: 0.66", 0.66),
    ("Score: 0.2\nOn reflection, Score: 0.4", 0.4),
    ("0", 0.0),
    ("1.", 1.0),
])
def test_parse_score_reads_common_reply_shapes(reply: str, score: float) -> None:
    assert parse_score(reply) == pytest.approx(score)


@pytest.mark.parametrize(("reply", "scale", "score"), [("8", 10, 0.8), ("Score: 10", 10, 1.0), ("4/5", 10, 0.8)])
def test_parse_score_divides_bare_numbers_by_the_scale(reply: str, scale: float, score: float) -> None:
    assert parse_score(reply, scale=scale) == pytest.approx(score)


@pytest.mark.parametrize("reply", ["great answer", "Score: N/A", "0.7 or 0.8", "", "   \n", "Score: high"])
def test_garbage_replies_raise_judge_error_quoting_the_reply(reply: str) -> None:
    with pytest.raises(JudgeError, match="holds no score"):
        parse_score(reply)


@pytest.mark.parametrize("reply", ["Score: 1.5", "-0.2", "8", "Score: 11/10", "150%", "Score: 3/0"])
def test_out_of_range_scores_raise_judge_error(reply: str) -> None:
    with pytest.raises(JudgeError, match=r"outside|over 0"):
        parse_score(reply)


def test_judge_sends_rubric_gold_and_output_and_returns_the_score() -> None:
    model = FakeModel("Looks right.\nScore: 0.75")
    judge = llm_judge(model, rubric="Is the capital named correctly?")
    assert judge("Paris", "Paris, France") == 0.75
    (prompt,) = model.prompts
    assert "Is the capital named correctly?" in prompt
    assert "Reference answer:\nParis, France" in prompt
    assert "Answer to grade:\nParis" in prompt
    assert "from 0 (wrong) to 1" in prompt


def test_judge_without_gold_omits_the_reference_and_uses_its_scale() -> None:
    model = FakeModel("Score: 9")
    judge = llm_judge(model, rubric="Is it polite?", scale=10)
    assert judge("Thank you!", None) == pytest.approx(0.9)
    assert "Reference answer" not in model.prompts[0]
    assert "to 10 (fully" in model.prompts[0]


@pytest.mark.parametrize("reply", ["I cannot grade this.", None, 0.5])
def test_judge_never_turns_garbage_into_zero(reply: Any) -> None:
    judge = llm_judge(FakeModel(reply), rubric="Correct?")
    with pytest.raises(JudgeError):
        judge("x", "y")


def test_judge_lets_errors_of_complete_propagate() -> None:
    def broken(prompt: str) -> str:
        raise TimeoutError("provider timed out")

    with pytest.raises(TimeoutError):
        llm_judge(broken, rubric="Correct?")("x", "y")


@pytest.mark.parametrize(("complete", "rubric", "scale"), [
    ("not callable", "r", 1.0), (FakeModel("1"), "  ", 1.0), (FakeModel("1"), "r", 0), (FakeModel("1"), "r", True),
])
def test_llm_judge_refuses_bad_configuration(complete: Any, rubric: str, scale: Any) -> None:
    with pytest.raises(ConfigError):
        llm_judge(complete, rubric=rubric, scale=scale)


def test_a_judge_is_a_scorer_for_get_scorer() -> None:
    judge = llm_judge(FakeModel("Score: 1"), rubric="Correct?")
    assert get_scorer(judge) is judge
