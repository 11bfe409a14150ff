"""`LibraryStrategy` routes each edit to the artifact it names and never edits an L0 artifact."""

from __future__ import annotations

import pytest

from agentgrad.core.artifact import Layer
from agentgrad.core.diff import apply_ops
from agentgrad.core.library import pack, unpack
from agentgrad.errors import ConfigError, InvalidProposalError
from agentgrad.strategies.library import LibraryStrategy
from agentgrad.strategies.rules import AppendRules
from agentgrad.strategies.whole import WholeText

TEXT = pack({"system": "Be brief.\n", "skill": "- check units\n", "policy": "- never lie\n"})


def _strategy(default: str | None = None) -> LibraryStrategy:
    return LibraryStrategy({"system": WholeText(), "skill": AppendRules(), "policy": AppendRules()},
                           {"system": Layer.L2, "skill": Layer.L2, "policy": Layer.L0}, default=default)


def test_edits_naming_artifacts_go_to_those_artifacts() -> None:
    ops = _strategy().ops([{"artifact": "skill", "action": "add", "content": "- show the work"},
                           {"artifact": "system", "action": "replace", "content": "Be kind.\n"}], TEXT)
    assert {op.member for op in ops} == {"skill", "system"}
    after = unpack(apply_ops(TEXT, ops))
    assert after["skill"] == "- check units\n- show the work\n" and after["system"] == "Be kind.\n"
    assert after["policy"] == "- never lie\n"


def test_a_dict_of_ids_to_proposals_edits_each_artifact_its_own_way() -> None:
    ops = _strategy().ops({"skill": "- show the work", "system": "Be kind.\n"}, TEXT)
    assert unpack(apply_ops(TEXT, ops))["system"] == "Be kind.\n"


def test_an_edit_of_an_l0_artifact_is_refused() -> None:
    with pytest.raises(InvalidProposalError, match="'policy' is in layer L0"):
        _strategy().ops({"artifact": "policy", "action": "add", "content": "- lie"}, TEXT)


def test_free_text_needs_a_default_when_several_artifacts_are_writable() -> None:
    with pytest.raises(InvalidProposalError, match="say which artifact"):
        _strategy().ops("- show the work", TEXT)
    ops = _strategy(default="skill").ops("- show the work", TEXT)
    assert {op.member for op in ops} == {"skill"}


def test_an_unknown_artifact_is_refused_by_name() -> None:
    with pytest.raises(InvalidProposalError, match="nope"):
        _strategy().ops({"nope": "- x"}, TEXT)
    with pytest.raises(InvalidProposalError, match="nope"):
        _strategy().ops([{"artifact": "nope", "action": "add", "content": "- x"}], TEXT)


def test_render_shows_every_artifact_the_l0_one_included() -> None:
    assert _strategy().render(TEXT) == {"policy": "- never lie\n", "skill": "- check units\n",
                                        "system": "Be brief.\n"}


def test_contradictions_are_judged_within_one_artifact_only() -> None:
    strategy = _strategy()
    yes = strategy.ops({"skill": "- always round"}, TEXT)[0]
    no = strategy.ops({"skill": "- never round"}, TEXT)[0]
    elsewhere = yes.within("system")
    assert strategy.contradicts(yes, no)
    assert not strategy.contradicts(no, elsewhere)


def test_strategies_and_layers_must_name_the_same_artifacts() -> None:
    with pytest.raises(ConfigError, match="same members"):
        LibraryStrategy({"a": AppendRules()}, {"b": Layer.L2})
    with pytest.raises(ConfigError, match="default member"):
        LibraryStrategy({"a": AppendRules()}, {"a": Layer.L2}, default="b")
