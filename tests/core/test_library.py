"""A library packs several artifacts into one text; ops that name a member edit only that member."""

from __future__ import annotations

from typing import Any

import pytest

from agentgrad.core.artifact import Artifact, Kind, Layer
from agentgrad.core.diff import Diff, apply, compose, fingerprint, invert, simplify
from agentgrad.core.library import Library, changed_members, is_packed, member_text, pack, unpack
from agentgrad.core.ops import Op
from agentgrad.core.rebase import Conflict, rebase
from agentgrad.errors import ConfigError, InvalidOpError


def _packed() -> str:
    return pack({"system": "Be brief.\n", "skill": "- check units\n"})


def test_pack_is_deterministic_and_unpack_reverses_it() -> None:
    assert pack({"b": "2", "a": "1"}) == pack({"a": "1", "b": "2"})
    assert unpack(_packed()) == {"skill": "- check units\n", "system": "Be brief.\n"}
    assert is_packed(_packed()) and not is_packed("- a rule")


def test_unpack_refuses_text_that_is_no_library() -> None:
    with pytest.raises(InvalidOpError, match="not a packed library"):
        unpack("- a rule\n")
    with pytest.raises(InvalidOpError, match="not valid JSON"):
        unpack("agentgrad-library/1\n{oops")


def test_a_member_op_edits_only_its_member() -> None:
    text = _packed()
    diff = Diff("library", 0, (Op.add("rule", "- show the work").within("skill"),))
    after = unpack(apply(diff, text))
    assert after["skill"] == "- check units\n- show the work\n"
    assert after["system"] == "Be brief.\n"


def test_an_op_on_an_unknown_member_is_refused() -> None:
    with pytest.raises(InvalidOpError, match="not a member"):
        apply(Diff("library", 0, (Op.add("rule", "- x").within("nope"),)), _packed())


def test_invert_undoes_member_ops() -> None:
    text = _packed()
    diff = Diff("library", 0, (Op.add("rule", "- a").within("skill"), Op.replace("text", "Be brief.\n", "Be kind.\n")
                               .within("system")))
    assert apply(invert(diff, text), apply(diff, text)) == text


def test_the_same_unit_in_two_members_is_two_units() -> None:
    a = Diff("library", 0, (Op.add("rule", "- a").within("skill"),))
    b = Diff("library", 0, (Op.add("rule", "- a").within("system"),))
    assert not a.keys() & b.keys()
    assert fingerprint(a) != fingerprint(b)
    assert a.members() == {"skill"}


def test_plain_ops_keep_their_fingerprint_and_dict() -> None:
    op = Op.add("rule", "- a")
    assert "member" not in op.to_dict()
    assert Op.from_dict(op.within("skill").to_dict()) == op.within("skill")
    assert fingerprint(Diff("x", 0, (op,))) == fingerprint(Diff("x", 3, (op,), author="someone"))


def test_simplify_never_merges_ops_of_two_members() -> None:
    first = Op.add("rule", "- a").within("skill")
    second = Op.delete("rule", "- a").within("system")
    assert simplify([first, second]) == (first, second)
    assert simplify([first, Op.delete("rule", "- a").within("skill")]) == ()


def test_rebase_moves_a_member_op_past_edits_of_another_member() -> None:
    text = _packed()
    theirs = Diff("library", 0, (Op.replace("text", "Be brief.\n", "Be kind.\n").within("system"),))
    ours = Diff("library", 0, (Op.add("rule", "- a").within("skill"),))
    head = apply(theirs, text)
    moved = rebase(ours, head, 1)
    assert isinstance(moved, Diff) and moved.base_version == 1
    assert unpack(apply(moved, head)) == {"system": "Be kind.\n", "skill": "- check units\n- a\n"}
    clash = Diff("library", 0, (Op.replace("text", "Be brief.\n", "Be loud.\n").within("system"),))
    conflict = rebase(clash, head, 1)
    assert isinstance(conflict, Conflict) and "system" in conflict.reason


def test_compose_keeps_member_ops() -> None:
    one = Diff("library", 0, (Op.add("rule", "- a").within("skill"),))
    two = Diff("library", 1, (Op.add("rule", "- b").within("skill"),))
    assert unpack(apply(compose(one, two), _packed()))["skill"] == "- check units\n- a\n- b\n"


def test_library_of_a_mapping_makes_texts_skills_and_sorts_members() -> None:
    members: dict[str, Artifact | str] = {"system": Artifact("system", Kind.PROMPT, "x"), "skill": "- a"}
    lib = Library.of(members)
    assert lib.ids == ("skill", "system")
    assert lib["skill"].kind is Kind.SKILL
    packed = lib.packed()
    assert packed.kind is Kind.LIBRARY and member_text(packed.text, "system") == "x"


@pytest.mark.parametrize(("members", "message"), [
    ({}, "at least one"),
    ({"library": "x"}, "own id"),
    ({"a": Artifact("b", Kind.SKILL, "")}, "use the artifact's id"),
    ({"a": Artifact("a", Kind.SKILL, "", Layer.L0)}, "nothing could be learned"),
    ({"a": 3}, "must be an Artifact or a text"),
])
def test_a_bad_library_is_refused_saying_why(members: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Library.of(members)  # type: ignore[arg-type]


@pytest.mark.parametrize(("raw", "value"), [(True, None), (True, (1,)), (False, None), (False, 3), (False, "skill")])
def test_a_library_of_something_other_than_artifacts_is_a_config_error(raw: bool, value: Any) -> None:
    with pytest.raises(ConfigError, match="Artifact"):
        Library(value) if raw else Library.of(value)


def test_changed_members_names_the_members_whose_text_differs() -> None:
    old = pack({"system": "Be brief.", "tips": "", "verifier": "ok"})
    new = pack({"system": "Be kind.", "tips": "", "verifier": "ok"})
    assert changed_members(old, new) == frozenset({"system"})
    assert changed_members(old, old) == frozenset()
    assert changed_members(old, pack({"system": "Be brief.", "tips": ""})) == frozenset({"verifier"})
