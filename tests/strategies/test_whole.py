"""WholeText: the proposal is the new text; one replace, an add on an empty artifact, nothing if identical."""

from __future__ import annotations

from typing import Any

import pytest

from agentgrad.core.diff import apply, apply_ops
from agentgrad.core.ops import Op
from agentgrad.core.units import Scope
from agentgrad.errors import InvalidProposalError
from agentgrad.strategies import Strategy, WholeText, make_diff

WHOLE = WholeText()


def test_a_new_text_is_one_replace() -> None:
    ops = WHOLE.ops("Be brief.\n", "Be long.\n")
    assert ops == (Op.replace(Scope.TEXT, "Be long.\n", "Be brief.\n"),)
    assert apply_ops("Be long.\n", ops) == "Be brief.\n"


def test_an_empty_artifact_gets_an_add() -> None:
    diff = make_diff(WHOLE, "prompts/system", 0, "", "  You are helpful.\n")
    assert diff.ops == (Op.add(Scope.TEXT, "  You are helpful.\n"),)
    assert apply(diff, "") == "  You are helpful.\n"


def test_an_identical_text_gives_no_ops() -> None:
    assert WHOLE.ops("same\n", "same\n") == ()


def test_structured_replace_and_delete() -> None:
    assert apply_ops("old", WHOLE.ops([{"action": "replace", "content": "new"}], "old")) == "new"
    assert apply_ops("old", WHOLE.ops({"action": "delete"}, "old")) == ""


@pytest.mark.parametrize(("proposal", "text", "message"), [
    ({"action": "delete"}, "", "not in the artifact"),
    ({"action": "replace", "content": "x"}, "", "not in the artifact"),
    ({"text": "x"}, "old", "dict proposal must be one edit"),
    ({"action": "replace", "content": "   "}, "old", "non-empty 'content'"),
])
def test_bad_whole_text_proposals_are_refused(proposal: Any, text: str, message: str) -> None:
    with pytest.raises(InvalidProposalError, match=message):
        WHOLE.ops(proposal, text)


def test_two_different_new_texts_contradict_and_equal_ones_do_not() -> None:
    a = Op.replace(Scope.TEXT, "old", "one")
    assert WHOLE.contradicts(a, Op.replace(Scope.TEXT, "old", "two"))
    assert not WHOLE.contradicts(a, Op.add(Scope.TEXT, "one"))


def test_render_shows_the_text_as_it_is_and_the_class_is_a_strategy() -> None:
    strategy: Strategy = WHOLE
    assert strategy.render("# x\n") == "# x\n"
    assert (strategy.scope, strategy.name) == (Scope.TEXT, "whole_text")
