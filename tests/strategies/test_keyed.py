"""KeyedRules: new keys are added, changed values replaced in place, equal values left alone."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgrad.core.diff import apply_ops
from agentgrad.core.ops import Action, Op
from agentgrad.core.units import Scope
from agentgrad.errors import InvalidProposalError
from agentgrad.strategies import KeyedRules, entries

KEYED = KeyedRules()
BASE = "# Settings\n* Tone: formal\n  length: short\nfree text line\n"


def test_a_new_key_is_appended_as_a_bullet() -> None:
    ops = KEYED.ops("audience: experts", BASE)
    assert ops == (Op.add(Scope.KEY, "- audience: experts"),)
    assert apply_ops(BASE, ops) == BASE + "- audience: experts\n"


def test_a_changed_value_replaces_the_line_keeping_its_bullet_indent_and_key_spelling() -> None:
    ops = KEYED.ops("tone: casual\nLENGTH: long", BASE)
    assert [op.action for op in ops] == [Action.REPLACE, Action.REPLACE]
    assert apply_ops(BASE, ops) == "# Settings\n* Tone: casual\n  length: long\nfree text line\n"


def test_the_same_value_gives_no_ops_even_with_other_spacing() -> None:
    assert KEYED.ops("- tone:   formal\n\nlength: short  ", BASE) == ()


def test_a_dict_sets_keys_and_none_deletes_one() -> None:
    ops = KEYED.ops({"tone": "dry", "length": None, "audience": "kids"}, BASE)
    assert apply_ops(BASE, ops) == "# Settings\n* Tone: dry\nfree text line\n- audience: kids\n"


def test_structured_edits_replace_by_target_and_delete_by_key() -> None:
    ops = KEYED.ops([
        {"action": "replace", "target": "tone", "content": "tone: warm"},
        {"action": "delete", "target": "- length: short"},
    ], BASE)
    assert apply_ops(BASE, ops) == "# Settings\n* Tone: warm\nfree text line\n"


def test_a_replace_with_another_key_renames_the_entry() -> None:
    ops = KEYED.ops({"action": "replace", "target": "tone", "content": "voice: calm"}, BASE)
    assert apply_ops(BASE, ops) == "# Settings\n* voice: calm\n  length: short\nfree text line\n"


def test_values_may_hold_colons() -> None:
    text = apply_ops("", KEYED.ops("url: http://example.org/a:b", ""))
    assert entries(text) == {"url": "http://example.org/a:b"}


@pytest.mark.parametrize(("proposal", "message"), [
    ("just a sentence", "not a 'key: value' line"),
    ("tone:", "empty value"),
    ({"tone": 3}, "string or None"),
    ({"a:b": "c"}, "not a key"),
    ({"action": "delete", "target": "audience"}, "not in the artifact"),
    ({"action": "replace", "content": "audience: kids"}, "not in the artifact"),
    ({"action": "add", "content": "tone: a\nlength: b"}, "not a 'key: value' line"),
])
def test_bad_keyed_proposals_are_refused(proposal: Any, message: str) -> None:
    with pytest.raises(InvalidProposalError, match=message):
        KEYED.ops(proposal, BASE)


def test_contradicts_means_same_key_different_value() -> None:
    casual = Op.add(Scope.KEY, "- tone: casual")
    assert KEYED.contradicts(casual, Op.replace(Scope.KEY, "* Tone: formal", "* Tone: formal"))
    assert KEYED.contradicts(casual, Op.delete(Scope.KEY, "- tone: casual"))
    assert not KEYED.contradicts(casual, Op.add(Scope.KEY, "tone:  casual"))
    assert not KEYED.contradicts(casual, Op.add(Scope.KEY, "- length: casual"))


def test_entries_reads_the_first_value_of_each_normalised_key() -> None:
    assert entries("# x\n- Tone: a\ntone: b\nplain\nLength : c") == {"tone": "a", "length": "c"}


simple = st.text(alphabet="abcxyz", min_size=1, max_size=6)


@settings(max_examples=60, derandomize=True)
@given(st.dictionaries(simple, simple, min_size=1, max_size=6), st.dictionaries(simple, simple, min_size=1, max_size=6))
def test_applying_a_dict_makes_the_text_hold_it_and_asking_again_gives_no_ops(
        before: dict[str, str], after: dict[str, str]) -> None:
    text = apply_ops("# Keys\n", KEYED.ops(dict(before), "# Keys\n"))
    text = apply_ops(text, KEYED.ops(dict(after), text))
    held = entries(text)
    assert all(held[k] == v for k, v in after.items())
    assert set(held) == set(before) | set(after)
    assert KEYED.ops(dict(after), text) == ()
