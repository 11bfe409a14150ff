"""The aggregator shell: input validation with typed errors, state dict round trips, the default recipe."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentgrad.core.decision import Outcome
from agentgrad.core.diff import Diff
from agentgrad.core.evidence import Evidence
from agentgrad.core.ops import Op
from agentgrad.errors import InvalidEvidenceError, StateDictError, UnknownArtifactError, UnknownVersionError
from agentgrad.optim.aggregator import Aggregator
from agentgrad.optim.base import Batch, Candidate, Context, Head, Stage
from agentgrad.optim.recipes import default

AID = "skills/s"
TASKS = [f"t{i}" for i in range(12)]


def strong(n: int = 12) -> Evidence:
    return Evidence.paired(dict.fromkeys(TASKS[:n], 0.0), dict.fromkeys(TASKS[:n], 1.0))


def ctx(version: int = 0, text: str = "", known: frozenset[str] | None = None) -> Context:
    return Context({AID: Head(version, text)}, known_tasks=known)


def test_a_diff_against_an_unknown_artifact_is_a_typed_error() -> None:
    with pytest.raises(UnknownArtifactError, match="skills/other"):
        Aggregator(default()).step([Candidate(Diff("skills/other", 0, (Op.add("rule", "- a"),)), strong())], ctx())


def test_a_diff_against_a_version_newer_than_the_head_is_a_typed_error() -> None:
    with pytest.raises(UnknownVersionError, match="version 3"):
        Aggregator(default()).step([Candidate(Diff(AID, 3, (Op.add("rule", "- a"),)), strong())], ctx())


def test_evidence_naming_unknown_tasks_is_a_typed_error() -> None:
    with pytest.raises(InvalidEvidenceError, match="unknown task"):
        Aggregator(default()).step([Candidate(Diff(AID, 0, (Op.add("rule", "- a"),)), strong())],
                                   ctx(known=frozenset(TASKS[:3])))


def test_two_candidates_with_one_diff_id_are_refused() -> None:
    diff = Diff(AID, 0, (Op.add("rule", "- a"),))
    with pytest.raises(ValueError, match="twice"):
        Aggregator(default()).step([Candidate(diff, strong()), Candidate(diff, strong())], ctx())


def test_the_default_recipe_accepts_a_clear_gain_and_turns_down_a_tie() -> None:
    good = Candidate(Diff(AID, 0, (Op.add("rule", "- good"),)), strong())
    tie = Candidate(Diff(AID, 0, (Op.add("key", "k: v"),)), Evidence.paired({"t1": 0.0, "t2": 1.0},
                                                                          {"t1": 1.0, "t2": 0.0}))
    result = Aggregator(default()).step([good, tie], ctx())
    assert [c.diff.id for c in result.accepted] == [good.diff.id]
    assert result.decision_for(tie.diff.id).outcome in (Outcome.REJECTED, Outcome.DROPPED)


def test_the_default_recipe_equals_its_stages_applied_by_hand() -> None:
    pipeline = default()
    batch = Batch((Candidate(Diff(AID, 0, (Op.add("rule", "- a"),)), strong()),
                   Candidate(Diff(AID, 0, (Op.add("rule", "- b"),)), strong(6))))
    chained, _ = pipeline.update(batch, pipeline.init(), ctx())
    by_hand = batch
    for stage in _stages():
        by_hand, _ = stage.update(by_hand, stage.init(), ctx())
    assert chained == by_hand


def _stages() -> list[Stage[Any]]:
    from agentgrad.optim.acceptance import accept_if
    from agentgrad.optim.conflicts import resolve_conflicts
    from agentgrad.optim.fusion import fuse
    from agentgrad.optim.governance import govern
    from agentgrad.optim.staleness import drop_stale
    from agentgrad.optim.tabu import tabu
    from agentgrad.optim.trust_region import limit_size
    return [tabu(), govern(), drop_stale(), limit_size(), resolve_conflicts(), fuse(looks=2), accept_if()]


def test_aggregator_state_round_trips_through_json_and_behaves_the_same() -> None:
    first = Aggregator(default())
    bad = Candidate(Diff(AID, 0, (Op.add("rule", "- bad"),)), Evidence.paired({"t1": 1.0, "t2": 1.0},
                                                                           {"t1": 0.0, "t2": 0.0}))
    first.step([bad], ctx())
    second = Aggregator(default())
    second.load_state_dict(json.loads(json.dumps(first.state_dict())))
    assert second.state_dict() == first.state_dict()
    again = Candidate(Diff(AID, 0, (Op.add("rule", "-   BAD"),), author="someone else"), strong())
    assert second.step([again], ctx()).decisions[0].outcome is Outcome.TABU


def test_loading_a_state_dict_of_another_pipeline_changes_nothing() -> None:
    agg = Aggregator(default())
    before = agg.state_dict()
    with pytest.raises(StateDictError):
        agg.load_state_dict({"pipeline": "other", "steps": 0, "state": {}})
    with pytest.raises(StateDictError):
        agg.load_state_dict({"pipeline": "default", "steps": 0, "state": {"stages": []}})
    assert agg.state_dict() == before


def test_the_failed_replications_counted_against_evidence_are_read_from_the_acceptance_stage() -> None:
    aggregator = Aggregator(default())
    marks = ("t99@000000000001", "t99@000000000002", "t99@000000000003", "t99@000000000004", "t99@000000000005")
    ties = Evidence.paired(dict.fromkeys(["t0", *marks], 1.0), dict.fromkeys(["t0", *marks], 1.0), replicas=marks)
    assert aggregator.replication_tried(ties) == 0
    failing = Candidate(Diff(AID, 0, (Op.add("rule", "- a"),)), ties, looks=2, origin="t99", replicate=True)
    (decision,) = aggregator.step([failing], ctx(0, "# s\n")).decisions
    assert decision.outcome is Outcome.REJECTED
    assert aggregator.replication_tried(ties) == 1 and aggregator.replication_tried(strong()) == 0
