"""Diff algebra: apply, invert and compose laws, validation of ops and diffs, fingerprints."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgrad.core.diff import Diff, apply, compose, fingerprint, invert
from agentgrad.core.ops import Action, Op
from agentgrad.core.units import Scope, parse
from agentgrad.errors import ApplyConflictError, InvalidIdError, InvalidOpError

WORDS = st.sampled_from(["brief", "cite", "check", "units", "dates", "sum", "plan", "test"])


@st.composite
def text_and_diff(draw: st.DrawFn) -> tuple[str, Diff]:
    """A rules text and a random valid diff against it (built by simulating the ops)."""
    rules = draw(st.lists(WORDS, unique=True, max_size=5))
    text = draw(st.sampled_from(["", "intro\n", "intro"])) + "".join(f"\n- {r}" for r in rules)
    ops: list[Op] = []
    current = text
    for _ in range(draw(st.integers(0, 4))):
        keys = parse(Scope.RULE, current).keys()
        lines = {s.key: s.text for s in parse(Scope.RULE, current).segments if s.key}
        action = draw(st.sampled_from(list(Action)))
        word = draw(WORDS)
        if action is Action.ADD and word not in keys:
            op = Op.add(Scope.RULE, f"- {word}", at=draw(st.none() | st.integers(0, 6)))
        elif action is not Action.ADD and keys:
            key = draw(st.sampled_from(keys))
            new = f"- {word} {key}"
            if action is Action.DELETE:
                op = Op.delete(Scope.RULE, lines[key])
            elif new.removeprefix("- ") in keys:
                continue
            else:
                op = Op.replace(Scope.RULE, lines[key], new)
        else:
            continue
        ops.append(op)
        current = apply(Diff("s", 0, tuple(ops)), text)
    return text, Diff("s", 0, tuple(ops))


@settings(max_examples=200, derandomize=True)
@given(text_and_diff())
def test_invert_undoes_apply_exactly(case: tuple[str, Diff]) -> None:
    text, diff = case
    assert apply(invert(diff, text), apply(diff, text)) == text


@settings(max_examples=200, derandomize=True)
@given(text_and_diff(), st.data())
def test_compose_equals_applying_both_in_turn(case: tuple[str, Diff], data: st.DataObject) -> None:
    text, first = case
    middle = apply(first, text)
    second_text, second = data.draw(text_and_diff().filter(lambda c: True))
    del second_text
    try:
        after = apply(Diff("s", 1, second.ops), middle)
    except ApplyConflictError:
        return
    composed = compose(first, Diff("s", 1, second.ops))
    assert apply(composed, text) == after


def test_compose_cancels_an_add_followed_by_its_delete() -> None:
    add = Diff("s", 0, (Op.add("rule", "- a"),))
    delete = Diff("s", 1, (Op.delete("rule", "- a"),))
    assert compose(add, delete).ops == ()


def test_compose_refuses_diffs_that_do_not_chain() -> None:
    with pytest.raises(InvalidOpError, match="based on version"):
        compose(Diff("s", 0, ()), Diff("s", 5, ()))
    with pytest.raises(InvalidOpError, match="cannot compose"):
        compose(Diff("s", 0, ()), Diff("t", 1, ()))


def test_apply_refuses_ops_that_do_not_fit_the_text() -> None:
    with pytest.raises(ApplyConflictError, match="already there"):
        apply(Diff("s", 0, (Op.add("rule", "- a"),)), "- a")
    with pytest.raises(ApplyConflictError, match="not there"):
        apply(Diff("s", 0, (Op.delete("rule", "- a"),)), "")
    with pytest.raises(ApplyConflictError, match="other text"):
        apply(Diff("s", 0, (Op.replace("rule", "- a", "- b"),)), "- A")


@pytest.mark.parametrize("data", [
    {"action": "paste", "scope": "rule", "new": "- a"},
    {"action": "add", "scope": "paragraph", "new": "- a"},
    {"action": "add", "scope": "rule"},
    {"action": "delete", "scope": "rule", "old": "- a", "new": "- b"},
    {"action": "add", "scope": "rule", "new": 42},
    {"action": "add", "scope": "rule", "new": "- a", "colour": "red"},
    "add a rule",
])
def test_malformed_ops_raise_a_clear_typed_error(data: object) -> None:
    with pytest.raises(InvalidOpError):
        Op.from_dict(data)


@pytest.mark.parametrize("bad", ["", "../etc/passwd", "/abs", "a//b", "a\x00b", "x" * 201, ".hidden", "a/..", 7])
def test_invalid_artifact_ids_are_refused(bad: object) -> None:
    with pytest.raises(InvalidIdError):
        Diff(bad, 0, ())  # type: ignore[arg-type]


def test_diff_round_trips_through_its_dict() -> None:
    diff = Diff("skills/x", 3, (Op.add("key", "a: 1", at=0), Op.replace("text", "x", "y")), author="w1",
                rationale="why", breaks_contract=True)
    assert Diff.from_dict(diff.to_dict()) == diff


def test_fingerprint_ignores_author_case_space_and_base() -> None:
    a = Diff("s", 0, (Op.add("rule", "- Be brief."),), author="w1")
    b = Diff("s", 4, (Op.add("rule", "-   be BRIEF"),), author="w2", rationale="other")
    c = Diff("s", 0, (Op.add("rule", "- be long"),))
    assert fingerprint(a) == fingerprint(b)
    assert fingerprint(a) != fingerprint(c)
    assert a.id != b.id


def test_adding_a_rule_keeps_the_final_newline() -> None:
    assert apply(Diff("s", 0, (Op.add("rule", "- b"),)), "- a\n") == "- a\n- b\n"
    assert apply(Diff("s", 0, (Op.add("rule", "- b"),)), "- a") == "- a\n- b"
