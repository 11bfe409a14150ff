"""The promotion policy: asks after every K accepted commits, resets on a passed check, round-trips its state; and
the store's side of a failed check: `revert_commit` undoes a commit below the dev head and never moves stable."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgrad.core.artifact import Artifact, Kind
from agentgrad.core.decision import Decision, Outcome
from agentgrad.core.diff import Diff, invert
from agentgrad.core.evidence import Evidence
from agentgrad.core.ops import Op
from agentgrad.core.rebase import rebase
from agentgrad.errors import (
    ConfigError,
    InvalidIdError,
    InvalidOpError,
    StaleHeadError,
    StateDictError,
    UnknownVersionError,
)
from agentgrad.store.promotion import Promotion
from agentgrad.store.sqlite import SQLiteStore


def test_asks_once_k_accepted_commits_have_accumulated() -> None:
    policy = Promotion(3)
    assert [policy.observe_accepted(a) for a in ("skills/a", "skills/b", "skills/a")] == [False, False, True]
    assert policy.count == 3 and policy.pending == ("skills/a", "skills/b")


def test_does_not_ask_again_while_a_check_is_running() -> None:
    policy = Promotion(2)
    answers = [policy.observe_accepted("skills/a") for _ in range(5)]
    assert answers == [False, True, False, False, False]


def test_a_passed_check_resets_the_counter() -> None:
    policy = Promotion(2)
    policy.observe_accepted("skills/a")
    policy.observe_accepted("skills/a")
    policy.confirm(True)
    assert policy.count == 0 and policy.pending == ()
    assert [policy.observe_accepted("skills/b") for _ in range(2)] == [False, True]


def test_a_failed_check_keeps_the_commits_and_asks_again_after_k_more() -> None:
    policy = Promotion(2)
    policy.observe_accepted("skills/a")
    policy.observe_accepted("skills/a")
    policy.confirm(False)
    assert policy.count == 2 and policy.pending == ("skills/a",)
    assert [policy.observe_accepted("skills/b") for _ in range(2)] == [False, True]
    assert policy.count == 4


@pytest.mark.parametrize("every", [0, -1, 1.5, True, "3"])
def test_every_must_be_a_positive_int(every: Any) -> None:
    with pytest.raises(ConfigError):
        Promotion(every)


def test_observing_an_invalid_artifact_id_is_refused() -> None:
    with pytest.raises(InvalidIdError):
        Promotion(2).observe_accepted("../escape")


EVENTS = st.lists(st.one_of(st.sampled_from(["skills/a", "skills/b", "prompts/c"]), st.booleans()), max_size=30)


def replay(policy: Promotion, events: list[str | bool]) -> list[bool | None]:
    """Feed events (an artifact id = an accepted commit, a bool = a confirm) and collect the answers."""
    out: list[bool | None] = []
    for event in events:
        if isinstance(event, bool):
            policy.confirm(event)
            out.append(None)
        else:
            out.append(policy.observe_accepted(event))
    return out


@settings(max_examples=100, derandomize=True)
@given(st.integers(1, 4), EVENTS, EVENTS)
def test_a_restored_policy_behaves_exactly_like_the_original(every: int, before: list[str | bool],
                                                             after: list[str | bool]) -> None:
    original = Promotion(every)
    replay(original, before)
    state = json.loads(json.dumps(original.state_dict()))
    restored = Promotion(every)
    restored.load_state_dict(state)
    assert restored.state_dict() == original.state_dict()
    assert replay(restored, after) == replay(original, after)


@settings(max_examples=100, derandomize=True)
@given(st.integers(1, 4), EVENTS)
def test_asks_exactly_when_k_commits_pile_up_since_the_last_answer(every: int, events: list[str | bool]) -> None:
    policy = Promotion(every)
    since_answer, waiting = 0, False
    for event, answer in zip(events, replay(policy, events), strict=True):
        if isinstance(event, bool):
            waiting, since_answer = False, 0
            continue
        since_answer += 1
        assert answer == (not waiting and since_answer >= every)
        waiting = waiting or bool(answer)


GOOD: dict[str, Any] = {"every": 2, "since": {"skills/a": 1}, "due": 2, "waiting": False}


@pytest.mark.parametrize("bad", [
    {"every": 3, "since": {}, "due": 3, "waiting": False},
    {"every": 2, "since": {}, "due": 2},
    {**GOOD, "extra": 1},
    {**GOOD, "since": {"../x": 1}},
    {**GOOD, "since": {"skills/a": 0}},
    {**GOOD, "since": ["skills/a"]},
    {**GOOD, "due": 0},
    {**GOOD, "due": "2"},
    {**GOOD, "waiting": 1},
    [],
])
def test_a_bad_state_dict_is_refused_and_changes_nothing(bad: Any) -> None:
    policy = Promotion(2)
    policy.observe_accepted("skills/b")
    before = policy.state_dict()
    with pytest.raises(StateDictError):
        policy.load_state_dict(bad)
    assert policy.state_dict() == before
    policy.load_state_dict(GOOD)
    assert policy.pending == ("skills/a",)


AID, TEXT = "skills/style", "# Style\n"
EVIDENCE = Evidence.paired({"t1": 0.0}, {"t1": 1.0})


def rule(base: int, text: str) -> Diff:
    return Diff(AID, base, (Op.add("rule", f"- {text}"),), author="w1", rationale=f"add {text}")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    """A store with rules one, two, three committed as versions 1, 2, 3 (stable at version 1)."""
    with SQLiteStore(tmp_path / "run", git=False) as opened:
        opened.add_artifact(Artifact(AID, Kind.SKILL, TEXT))
        for n, text in enumerate(["one", "two", "three"]):
            diff = rule(n, text)
            opened.commit(diff, EVIDENCE, Decision(diff.id, AID, Outcome.ACCEPTED, "accept", "better"))
        opened.promote_to({AID: 1})
        yield opened


def inverse_of_two(store: SQLiteStore) -> tuple[str, Diff]:
    """The id of the diff of version 2 and its inverse rebased onto the head (version 3)."""
    two = store.diff(store.version(AID, 2).diff_id or "")
    moved = rebase(replace(invert(two, store.version(AID, 1).text), base_version=2), store.head(AID).text, 3)
    assert isinstance(moved, Diff)
    return two.id, Diff(AID, 3, moved.ops, author="w1", rationale=f"revert {two.id}")


def test_revert_commit_undoes_a_commit_below_the_head_and_leaves_stable(store: SQLiteStore) -> None:
    two, inverse = inverse_of_two(store)
    version = store.revert_commit(two, inverse, reason="dev fell", numbers={"wins": 3})
    assert (version.number, version.text) == (4, TEXT + "- one\n- three\n")
    assert [(d.outcome, d.stage) for d in store.decisions(diff_id=two)] == [(Outcome.ACCEPTED, "accept"),
                                                                              (Outcome.REVERTED, "revert")]
    reverted, accepted = store.decisions(diff_id=two)[-1], store.decisions(diff_id=inverse.id)[-1]
    assert reverted.numbers == {"wins": 3, "reverted_version": 2, "revert_version": 4}
    assert (accepted.outcome, accepted.stage, accepted.reason) == (Outcome.ACCEPTED, "revert", "dev fell")
    assert store.head(AID, "stable").number == 1 and store.head(AID).diff_id == inverse.id


def test_revert_commit_refuses_a_stale_head_an_unknown_diff_and_a_second_revert(store: SQLiteStore) -> None:
    two, inverse = inverse_of_two(store)
    kept = rule(3, "never kept")
    store.record(kept, EVIDENCE, Decision(kept.id, AID, Outcome.REJECTED, "accept", "no"))
    before = (store.history(AID), store.decisions())
    with pytest.raises(StaleHeadError):
        store.revert_commit(two, inverse, reason="late", expected=2)
    with pytest.raises(UnknownVersionError, match="unknown diff"):
        store.revert_commit("dnope", inverse, reason="no such diff")
    with pytest.raises(UnknownVersionError, match="never committed"):
        store.revert_commit(kept.id, inverse, reason="not on dev")
    assert (store.history(AID), store.decisions()) == before
    store.revert_commit(two, inverse, reason="dev fell")
    with pytest.raises(InvalidOpError, match="already reverted"):
        store.revert_commit(two, replace(inverse, base_version=4), reason="again")
    assert store.head(AID).number == 4 and store.head(AID, "stable").number == 1
