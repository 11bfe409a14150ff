"""AppendRules: rules are appended once, negations replace, bad proposals are refused (for every strategy)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgrad.core.diff import apply, apply_ops
from agentgrad.core.ops import Action, Op
from agentgrad.core.units import Scope, parse
from agentgrad.errors import ConfigError, InvalidProposalError
from agentgrad.strategies import AppendRules, KeyedRules, Sections, WholeText, make_diff, negates, polarity
from agentgrad.strategies.base import UnitStrategy

RULES = AppendRules()
BASE = "# Style\n- Be concise.\n- always use tabs\n"


def test_each_line_or_bullet_becomes_an_appended_rule() -> None:
    ops = RULES.ops("cite sources\n* check units\n1. show the formula\n\n## ignored heading\n-", BASE)
    assert [op.action for op in ops] == [Action.ADD] * 3
    assert apply_ops(BASE, ops) == BASE + "- cite sources\n- check units\n- show the formula\n"


def test_rules_already_present_are_skipped_even_with_other_case_and_punctuation() -> None:
    assert RULES.ops("- be CONCISE\n- Always use tabs.", BASE) == ()


def test_a_rule_repeated_within_one_proposal_is_added_once() -> None:
    ops = RULES.ops("cite sources\n- Cite sources.", BASE)
    assert len(ops) == 1
    assert apply_ops(BASE, ops).count("ite sources") == 1


def test_a_negation_replaces_the_rule_it_negates_in_place() -> None:
    ops = RULES.ops("never use tabs", BASE)
    assert ops == (Op.replace(Scope.RULE, "- always use tabs", "- never use tabs"),)
    assert apply_ops(BASE, ops) == "# Style\n- Be concise.\n- never use tabs\n"


@pytest.mark.parametrize(("existing", "proposed"), [
    ("- guess", "don't guess"), ("- guess", "Do not guess."), ("- guess", "don\u2019t guess"),
    ("- use globals", "avoid use globals"), ("- never skip tests", "skip tests"), ("- dont guess", "always guess"),
])
def test_negation_forms_turn_an_add_into_a_replace(existing: str, proposed: str) -> None:
    text = f"intro\n{existing}\n"
    (op,) = RULES.ops(proposed, text)
    assert op.action is Action.REPLACE and op.old == existing
    assert apply_ops(text, (op,)) == f"intro\n- {proposed}\n"


@pytest.mark.parametrize(("rule", "expected"), [
    ("Never use tabs.", (False, "use tabs")), ("- always  Use tabs", (True, "use tabs")),
    ("do not guess", (False, "guess")), ("Don't guess!", (False, "guess")), ("avoid jargon", (False, "jargon")),
    ("use tabs", (True, "use tabs")), ("nevertheless go on", (True, "nevertheless go on")),
])
def test_polarity_reads_the_sign_and_the_core_of_a_rule(rule: str, expected: tuple[bool, str]) -> None:
    assert polarity(rule) == expected


@pytest.mark.parametrize(("a", "b", "expected"), [
    ("never X", "always x", True), ("don't x", "x", True), ("avoid x", "X.", True),
    ("never x", "do not x", False), ("always x", "x", False), ("never x", "always y", False),
    ("never", "always", False),
])
def test_negates_needs_opposite_signs_on_the_same_core(a: str, b: str, expected: bool) -> None:
    assert negates(a, b) is expected
    assert negates(b, a) is expected


def test_contradicts_is_true_for_ops_writing_a_rule_and_its_negation() -> None:
    add_never = Op.add(Scope.RULE, "- never use tabs")
    add_always = Op.add(Scope.RULE, "- Always use tabs")
    assert RULES.contradicts(add_never, add_always)
    assert not RULES.contradicts(add_never, Op.add(Scope.RULE, "- use spaces"))
    assert not RULES.contradicts(add_never, Op.delete(Scope.RULE, "- always use tabs"))
    assert not RULES.contradicts(add_never, Op.add(Scope.KEY, "- always use tabs: yes"))


def test_structured_edits_add_replace_and_delete() -> None:
    ops = RULES.ops([
        {"action": "add", "content": "cite sources"},
        {"action": "replace", "target": "be concise", "content": "- be brief"},
        {"action": "delete", "target": "- always use tabs"},
    ], BASE)
    assert apply_ops(BASE, ops) == "# Style\n- be brief\n- cite sources\n"


def test_an_add_with_a_target_goes_right_after_that_rule() -> None:
    ops = RULES.ops({"action": "add", "content": "be kind", "target": "be concise"}, BASE)
    assert apply_ops(BASE, ops) == "# Style\n- Be concise.\n- be kind\n- always use tabs\n"


def test_an_add_after_a_rule_the_artifact_lacks_goes_at_the_end() -> None:
    ops = RULES.ops({"action": "add", "content": "be kind", "target": "be rude"}, BASE)
    assert apply_ops(BASE, ops) == "# Style\n- Be concise.\n- always use tabs\n- be kind\n"


@pytest.mark.parametrize(("proposal", "message"), [
    ({"action": "delete", "target": "be rude"}, "not in the artifact"),
    ({"action": "replace", "target": "be rude", "content": "be kind"}, "not in the artifact"),
    ({"action": "rewrite", "content": "x"}, "unknown action"),
    ({"action": "add"}, "needs non-empty 'content'"),
    ({"action": "add", "content": "x", "why": "y"}, "only"),
    ({"action": "add", "content": 3}, "content must be a string"),
    ({"action": "add", "content": "two\nlines"}, "one line"),
    ({"action": "delete"}, "needs a 'target'"),
    ({"rules": ["x"]}, "dict proposal must be one edit"),
    ([{"action": "add", "content": "x"}, "oops"], "edit #2"),
])
def test_bad_structured_rule_edits_are_refused(proposal: Any, message: str) -> None:
    with pytest.raises(InvalidProposalError, match=message):
        RULES.ops(proposal, BASE)


ALL: list[UnitStrategy] = [AppendRules(), KeyedRules(), Sections(), WholeText()]


@pytest.mark.parametrize("strategy", ALL, ids=lambda s: s.name)
@pytest.mark.parametrize(("proposal", "message"), [
    (42, "got int"), (None, "got NoneType"), (b"- rule", "got bytes"), ({"a"}, "got set"),
    ("", "empty"), ("  \n\t ", "empty"), ([], "empty"), ({}, "empty"),
    ("- bad \ud800 rule", "lone surrogate"), ([{"action": "add", "content": "x\udfff"}], "lone surrogate"),
    ("x" * 20_001, "limit is 20000"), ([{"action": "add", "content": "y" * 20_001}], "limit is 20000"),
])
def test_every_strategy_refuses_malformed_proposals(strategy: UnitStrategy, proposal: Any, message: str) -> None:
    with pytest.raises(InvalidProposalError, match=message):
        strategy.ops(proposal, "")


def test_max_chars_is_configurable_and_validated() -> None:
    with pytest.raises(InvalidProposalError, match="limit is 5"):
        AppendRules(max_chars=5).ops("be concise", "")
    with pytest.raises(ConfigError, match="max_chars"):
        AppendRules(max_chars=0)


def test_make_diff_wraps_the_ops_against_the_base_version() -> None:
    diff = make_diff(RULES, "skills/style", 3, BASE, "cite sources", author="w1", rationale="sources")
    assert (diff.artifact_id, diff.base_version, diff.author, diff.rationale) == ("skills/style", 3, "w1", "sources")
    assert apply(diff, BASE) == BASE + "- cite sources\n"
    assert make_diff(RULES, "skills/style", 3, BASE, "be concise").ops == ()


simple_rules = st.lists(st.text(alphabet="abcxyz ", min_size=1, max_size=12).filter(str.strip), min_size=1,
                        max_size=8)


@settings(max_examples=60, derandomize=True)
@given(simple_rules, simple_rules)
def test_asking_again_after_applying_gives_no_ops(existing: list[str], proposed: list[str]) -> None:
    text = apply_ops("# Rules\n", RULES.ops("\n".join(existing), "# Rules\n"))
    text = apply_ops(text, RULES.ops("\n".join(proposed), text))
    keys = parse(Scope.RULE, text).keys()
    assert {" ".join(r.split()) for r in proposed} <= set(keys)
    assert len(keys) == len(set(keys))
    assert RULES.ops("\n".join(proposed), text) == ()
