"""Sections: new titles are appended, changed bodies replaced under the artifact's own heading."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgrad.core.diff import apply_ops
from agentgrad.core.ops import Action, Op
from agentgrad.core.units import Scope, parse
from agentgrad.errors import InvalidProposalError
from agentgrad.strategies import Sections

SECTIONS = Sections()
BASE = "# Guide\nintro\n\n## Steps\none\ntwo\n\n## Notes\nkeep it short\n"


def test_a_new_section_is_appended_and_the_text_keeps_its_final_newline() -> None:
    ops = SECTIONS.ops("## Examples\nsee below\n", BASE)
    assert ops == (Op.add(Scope.SECTION, "## Examples\nsee below\n"),)
    assert apply_ops(BASE, ops) == BASE + "\n## Examples\nsee below\n"


def test_a_changed_body_replaces_it_under_the_existing_heading_and_spacing() -> None:
    ops = SECTIONS.ops("# steps\n\nthree\nfour\n", BASE)
    assert ops == (Op.replace(Scope.SECTION, "## Steps\none\ntwo\n", "## Steps\nthree\nfour\n"),)
    assert apply_ops(BASE, ops) == "# Guide\nintro\n\n## Steps\nthree\nfour\n\n## Notes\nkeep it short\n"


def test_the_same_body_gives_no_ops_despite_blank_lines_and_trailing_spaces() -> None:
    assert SECTIONS.ops("## Steps\n\none  \ntwo\n\n\n## NOTES\nkeep it short", BASE) == ()


def test_several_sections_in_one_proposal_each_become_an_op() -> None:
    ops = SECTIONS.ops("## Notes\nbe brief\n## Tips\nask early", BASE)
    assert [op.action for op in ops] == [Action.REPLACE, Action.ADD]
    assert apply_ops(BASE, ops).endswith("## Notes\nbe brief\n\n## Tips\nask early\n")


def test_a_dict_writes_titles_and_none_deletes_one() -> None:
    ops = SECTIONS.ops({"Tips": "ask early", "Notes": None}, BASE)
    assert apply_ops(BASE, ops) == "# Guide\nintro\n\n## Steps\none\ntwo\n\n## Tips\nask early\n"


def test_structured_edits_target_a_title_or_a_heading_line() -> None:
    ops = SECTIONS.ops([
        {"action": "replace", "target": "## steps", "content": "## Procedure\ndo it"},
        {"action": "delete", "target": "Notes"},
    ], BASE)
    assert apply_ops(BASE, ops) == "# Guide\nintro\n\n## Procedure\ndo it\n"


@pytest.mark.parametrize(("proposal", "message"), [
    ("no heading at all", "text before its first heading"),
    ("preface\n## Steps\nx", "text before its first heading"),
    ({"Steps": ["x"]}, "string or None"),
    ({"two\nlines": "x"}, "not a section title"),
    ({"Steps": "## Nested\nx"}, "not exactly one section"),
    ({"action": "delete", "target": "Missing"}, "not in the artifact"),
    ({"action": "add", "content": "no heading"}, "not exactly one section"),
])
def test_bad_section_proposals_are_refused(proposal: Any, message: str) -> None:
    with pytest.raises(InvalidProposalError, match=message):
        SECTIONS.ops(proposal, BASE)


def test_contradicts_means_same_title_different_body() -> None:
    a = Op.add(Scope.SECTION, "## Steps\none")
    assert SECTIONS.contradicts(a, Op.add(Scope.SECTION, "# Steps\ntwo"))
    assert SECTIONS.contradicts(a, Op.delete(Scope.SECTION, "## Steps\none"))
    assert not SECTIONS.contradicts(a, Op.add(Scope.SECTION, "# steps\n\none\n"))
    assert not SECTIONS.contradicts(a, Op.add(Scope.SECTION, "## Other\ntwo"))


titles = st.text(alphabet="abcxyz", min_size=1, max_size=5)
bodies = st.text(alphabet="abc xyz\n", max_size=20)


@settings(max_examples=60, derandomize=True)
@given(st.dictionaries(titles, bodies, min_size=1, max_size=5))
def test_asking_again_after_applying_gives_no_ops(proposal: dict[str, str]) -> None:
    text = apply_ops(BASE, SECTIONS.ops(dict(proposal), BASE))
    assert set(proposal) <= set(parse(Scope.SECTION, text).keys())
    assert SECTIONS.ops(dict(proposal), text) == ()
