"""Parsing a text into units and rendering it back is exact; unit content is validated."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgrad.core.units import Scope, normalise, parse, unit_key
from agentgrad.errors import InvalidOpError

texts = st.text(alphabet=st.sampled_from(list("ab -*#:\n\r x")), max_size=60)


@settings(max_examples=300, derandomize=True)
@given(texts, st.sampled_from(list(Scope)))
def test_parse_then_render_returns_the_exact_text(text: str, scope: Scope) -> None:
    assert parse(scope, text).render() == text


def test_rule_lines_are_units_and_other_lines_are_filler() -> None:
    doc = parse(Scope.RULE, "intro\n- Be brief.\n* cite sources\n")
    assert [s.key for s in doc.segments] == [None, "be brief", "cite sources", None]


def test_sections_run_from_heading_to_next_heading() -> None:
    doc = parse(Scope.SECTION, "preamble\n## Steps\none\ntwo\n## Notes\nthree")
    assert doc.keys() == ["steps", "notes"]
    assert doc.segments[1].text == "## Steps\none\ntwo"


def test_keyed_entries_are_keyed_by_normalised_key() -> None:
    doc = parse(Scope.KEY, "Alpha Beta: use method 3\nplain line")
    assert doc.keys() == ["alpha beta"]


def test_normalise_ignores_case_space_and_trailing_punctuation() -> None:
    assert normalise("  Be   BRIEF. ") == normalise("be brief")


@pytest.mark.parametrize(("scope", "content"), [
    (Scope.RULE, "not a bullet"),
    (Scope.RULE, "- two\n- rules"),
    (Scope.KEY, "no colon here"),
    (Scope.SECTION, "no heading"),
    (Scope.SECTION, "## one\n## two"),
])
def test_content_that_is_not_exactly_one_unit_is_refused(scope: Scope, content: str) -> None:
    with pytest.raises(InvalidOpError):
        unit_key(scope, content)
