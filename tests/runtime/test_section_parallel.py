"""Section-parallel mode: each rollout worker owns disjoint sections of one artifact, so edits never clash."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentgrad import Budget, RunConfig, Workers, evolve
from agentgrad.core.diff import Diff
from agentgrad.core.ops import Op
from agentgrad.data.task import Task
from agentgrad.errors import ConfigError
from agentgrad.runtime.sections import SectionOwners, worker_index
from agentgrad.store.sqlite import SQLiteStore
from agentgrad.strategies.sections import Sections
from agentgrad.testing.sections_world import TOPICS, propose, reward, run, tasks


def _greedy(text: str, task: Task, output: Any, score: float) -> str:
    extra = "" if task.id != "t05" else "\n## billing\nsee nothing"  # one proposal reaches past its own section
    return propose(text, task, output, score) + extra


WORLD = tasks()  # 6 tasks a section: some sections have a single task in the gate pool, so replication decides


def _evolve(tmp_path: Path, asynchronous: bool) -> Any:
    return evolve(WORLD, reward, run=run, propose=_greedy, artifact="# Notes\n", strategy=Sections(),
                  budget=Budget(calls=500), store=tmp_path / "run", seed=2,
                  config=RunConfig(workers=Workers(rollout=4), asynchronous=asynchronous, parallel="sections"))


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_workers_roll_out_and_edit_only_their_own_sections(tmp_path: Path, asynchronous: bool) -> None:
    result = _evolve(tmp_path, asynchronous)
    assert result.ok, result.error
    right = [t for i, t in enumerate(TOPICS) if f"## {t}\nsee policy {i + 1}\n" in result.artifact.text]
    assert len(right) >= len(TOPICS) - 1  # every section's rule, or all but one (one with too few contexts)
    assert result.test_reward is not None and result.test_reward >= 0.6
    owners = SectionOwners.of({t.id: t for t in WORLD}, [t.id for t in WORLD], 4)
    with SQLiteStore(result.run_dir, git=False) as store:
        rollouts = store.journal.read(["rollout"])
    assert rollouts
    for event in rollouts:
        worker = worker_index(event.payload["worker"])
        section = next(t.meta["section"] for t in WORLD if t.id == event.payload["task"])
        assert worker == owners.owner(section)
    assert not any(d.outcome.value == "conflict" for d in result.decisions)


def test_a_diff_that_reaches_into_another_workers_section_is_refused() -> None:
    owners = SectionOwners.of({t.id: t for t in tasks()}, [t.id for t in tasks()], 4)
    mine = owners.owner("refunds")
    other = next(k for k in owners.assigned if owners.owner(k) != mine)
    diff = Diff("notes", 0, (Op.add("section", "## refunds\nx"), Op.add("section", f"## {other}\ny")),
                author=f"worker-{mine}")
    refusal = owners.refusal(diff)
    assert refusal is not None and other in refusal
    assert owners.refusal(Diff("notes", 0, (Op.add("section", "## refunds\nx"),), author=f"worker-{mine}")) is None


def test_section_mode_needs_every_task_to_name_its_section() -> None:
    tasks = {"a": Task("a", "x"), "b": Task("b", "y", meta={"section": "s"})}
    with pytest.raises(ConfigError, match="names no section"):
        SectionOwners.of(tasks, ["a", "b"], 1)
    with pytest.raises(ConfigError, match="1 sections for 2"):
        SectionOwners.of({"b": tasks["b"]}, ["b"], 2)


def test_an_unknown_parallel_mode_is_refused() -> None:
    with pytest.raises(ConfigError, match="parallel"):
        RunConfig(parallel="pipeline-ish")


def test_a_candidate_stranded_for_want_of_a_context_gets_its_closing_look_without_a_wait(tmp_path: Path) -> None:
    """Asynchronous, section-parallel: one section's rule won the two fresh contexts the run could make and waits
    for a third. Its origin is the last task its worker owns that the head fails, so that worker's tasks are all
    taken, and with nothing in flight no verdict can free one: the rollouts go ahead (they find the head solving
    their tasks), the run stops for want of proposals, and the candidate takes its closing look. Before, the worker
    waited for a free task without end (an earlier rebase made the version the rule was proposed on a third
    context, which hid this)."""
    result = _evolve(tmp_path, True)
    assert result.ok, result.error
    assert result.counts["closing_looks"] >= 1 and result.counts["idle_stops"] == 1
    assert result.counts.get("explore_unstuck", 0) == 0 and result.counts.get("task_waits", 0) < 25
