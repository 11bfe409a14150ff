"""Rebase laws: a diff moved onto a newer head applies there and keeps its effect, or reports a conflict."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agentgrad.core.diff import Diff, apply
from agentgrad.core.ops import Op
from agentgrad.core.rebase import Conflict, merge_text, rebase

LINES = st.lists(st.sampled_from(["alpha", "beta", "gamma", "delta", "eps"]), min_size=4, max_size=8)


def test_rule_add_rebases_over_an_unrelated_commit() -> None:
    diff = Diff("s", 0, (Op.add("rule", "- cite sources"),))
    head = apply(Diff("s", 0, (Op.add("rule", "- be brief"),)), "intro\n")
    moved = rebase(diff, head, 1)
    assert isinstance(moved, Diff) and moved.base_version == 1 and moved.id == diff.id
    assert apply(moved, head) == "intro\n- be brief\n- cite sources\n"


def test_rebase_reports_a_conflict_when_the_same_key_got_another_value() -> None:
    diff = Diff("s", 0, (Op.add("key", "dates: use method 1"),))
    head = "dates: use method 2"
    result = rebase(diff, head, 1)
    assert isinstance(result, Conflict) and "added meanwhile" in result.reason


def test_rebase_drops_ops_the_head_already_has() -> None:
    diff = Diff("s", 0, (Op.add("rule", "- a"),))
    result = rebase(diff, "- a", 1)
    assert isinstance(result, Diff) and result.ops == ()


def test_rebase_refuses_to_delete_a_unit_edited_meanwhile() -> None:
    diff = Diff("s", 0, (Op.delete("section", "## A\nold body"),))
    result = rebase(diff, "## A\nnew body", 2)
    assert isinstance(result, Conflict)


def test_whole_text_edits_on_distant_lines_merge_three_ways() -> None:
    base = "one\ntwo\nthree\nfour\nfive\n"
    diff = Diff("p", 0, (Op.replace("text", base, "ONE\ntwo\nthree\nfour\nfive\n"),))
    head = "one\ntwo\nthree\nfour\nFIVE\n"
    moved = rebase(diff, head, 1)
    assert isinstance(moved, Diff)
    assert apply(moved, head) == "ONE\ntwo\nthree\nfour\nFIVE\n"


def test_whole_text_edits_of_the_same_line_conflict() -> None:
    base = "one\ntwo\n"
    diff = Diff("p", 0, (Op.replace("text", base, "one\nTWO\n"),))
    assert isinstance(rebase(diff, "one\n2\n", 1), Conflict)


@settings(max_examples=200, derandomize=True)
@given(LINES, st.data())
def test_merge_keeps_both_sides_when_they_touch_disjoint_lines(lines: list[str], data: st.DataObject) -> None:
    base = [f"{w}{i}" for i, w in enumerate(lines)]
    i = data.draw(st.integers(0, len(base) // 2 - 1))
    j = data.draw(st.integers(len(base) // 2 + 1, len(base) - 1))
    ours, theirs = list(base), list(base)
    ours[i] = ours[i].upper()
    theirs[j] = theirs[j].upper()
    merged = merge_text("\n".join(base), "\n".join(ours), "\n".join(theirs))
    expected = list(base)
    expected[i], expected[j] = ours[i], theirs[j]
    assert merged == "\n".join(expected)


@settings(max_examples=100, derandomize=True)
@given(st.lists(st.sampled_from(["a", "b", "c", "d"]), unique=True, max_size=4),
       st.sampled_from(["e", "f"]), st.sampled_from(["g", "h"]))
def test_rebased_rule_diff_has_the_same_effect_on_the_new_head(rules: list[str], mine: str, theirs: str) -> None:
    base = "\n".join(f"- {r}" for r in rules)
    diff = Diff("s", 0, (Op.add("rule", f"- {mine}"),))
    head = apply(Diff("s", 0, (Op.add("rule", f"- {theirs}"),)), base)
    moved = rebase(diff, head, 1)
    assert isinstance(moved, Diff)
    result = apply(moved, head)
    assert f"- {mine}" in result.split("\n") and f"- {theirs}" in result.split("\n")
