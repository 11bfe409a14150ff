"""`evolve` over a library: a system prompt, a skill and a verifier learned together, an L0 policy untouched."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentgrad import Budget, evolve
from agentgrad.core.artifact import Artifact, Kind
from agentgrad.core.diff import Diff
from agentgrad.core.library import unpack
from agentgrad.errors import ConfigError
from agentgrad.runtime.result import Result
from agentgrad.store.members import member_diff_id
from agentgrad.store.sqlite import SQLiteStore
from agentgrad.strategies.rules import AppendRules
from agentgrad.testing.library_world import LOWERCASE, STRIP, LibraryWorld

WORLD = LibraryWorld(seed=3)


def _evolve(tmp_path: Path, *, asynchronous: bool, calls: int = 400, name: str = "run") -> Result:
    return evolve(WORLD.tasks(), WORLD.reward, run=WORLD.run, propose=WORLD.propose, artifact=WORLD.library(),
                  budget=Budget(calls=calls), workers=4, asynchronous=asynchronous, store=tmp_path / name, seed=1)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_library_run_learns_every_artifact_it_needs_and_leaves_l0_alone(tmp_path: Path,
                                                                          asynchronous: bool) -> None:
    result = _evolve(tmp_path, asynchronous=asynchronous)
    assert result.ok, result.error
    learned = {k: a.text for k, a in result.artifacts.items()}
    assert LOWERCASE in learned["system"] and STRIP in learned["verifier"]
    assert learned["skill"].count("capital-") >= 3
    assert learned["policy"] == WORLD.library()["policy"].text
    assert result.counts["invalid_proposals"] > 0  # the proposals that tried to edit the policy
    assert result.test_reward is not None and result.baseline_test_reward is not None
    assert result.test_reward > result.baseline_test_reward
    assert unpack(result.artifact.text) == learned
    assert all(f"=== {key} ===" in result.rendered for key in learned)


def test_a_change_of_several_artifacts_commits_on_each_of_them_at_once(tmp_path: Path) -> None:
    result = _evolve(tmp_path, asynchronous=False)
    multi = [v for v in result.history if v.diff_id is not None and
             len({op.member for op in _diff(result, v.diff_id).ops}) >= 2]
    assert multi, "the proposer asks for two artifacts at once; some such change should have landed"
    members = {op.member for op in _diff(result, multi[0].diff_id).ops}
    for member in members:
        assert member is not None
        parts = [v.diff_id for v in result.histories[member]]
        assert member_diff_id(multi[0].diff_id or "", member) in parts


def test_the_summary_counts_versions_per_artifact(tmp_path: Path) -> None:
    summary = _evolve(tmp_path, asynchronous=False).summary()
    assert "library commits" in summary and "policy 0" in summary


def test_a_library_run_resumes_where_it_stopped(tmp_path: Path) -> None:
    first = _evolve(tmp_path, asynchronous=False, calls=120)
    second = _evolve(tmp_path, asynchronous=False, calls=400)
    assert second.ok, second.error
    assert len(second.history) >= len(first.history)
    with SQLiteStore(tmp_path / "run", git=False) as store:
        heads = {a: store.artifact(a).text for a in ("policy", "skill", "system", "verifier")}
        assert unpack(store.artifact("library").text) == heads


def test_another_library_in_the_same_run_directory_is_refused(tmp_path: Path) -> None:
    _evolve(tmp_path, asynchronous=False, calls=60)
    with pytest.raises(ConfigError, match="another run"):
        evolve(WORLD.tasks(), WORLD.reward, run=WORLD.run, propose=WORLD.propose, budget=Budget(calls=60),
               artifact={"skill": "", "other": Artifact("other", Kind.PROMPT, "x")}, store=tmp_path / "run")


def test_a_strategy_for_an_artifact_the_library_lacks_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not artifacts of the library"):
        evolve(WORLD.tasks(), WORLD.reward, run=WORLD.run, propose=WORLD.propose, artifact=WORLD.library(),
               strategy={"nope": AppendRules()}, budget=Budget(calls=60), store=tmp_path / "x")


def _diff(result: Result, diff_id: str | None) -> Diff:
    assert diff_id is not None
    with SQLiteStore(result.run_dir, git=False) as store:
        return store.diff(diff_id)


def test_a_strategy_that_is_no_strategy_is_refused_by_artifact(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"\['skill'\] are not Strategy values"):
        evolve(WORLD.tasks(), WORLD.reward, run=WORLD.run, propose=WORLD.propose, artifact=WORLD.library(),
               strategy={"skill": 5}, budget=Budget(calls=60), store=tmp_path / "x")  # type: ignore[dict-item]
