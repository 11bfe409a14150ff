"""The JSONL event stream records the run's events as they happen, one JSON object per line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentgrad.runtime.budget import Budget
from agentgrad.runtime.evolve import evolve
from agentgrad.testing.agents import WorldAgent
from agentgrad.testing.world import ReferenceWorld, WorldConfig
from agentgrad.tracking import JsonlEvents


def test_a_run_streams_its_proposals_verdicts_and_commits(tmp_path: Path) -> None:
    world = ReferenceWorld(WorldConfig(seed=2, n_categories=4, tasks_per_category=40, noise=0.0))
    agent = WorldAgent(world)
    with JsonlEvents(tmp_path / "events" / "run.jsonl") as stream:
        result = evolve(agent.splits(), agent.reward, agent=agent, strategy=world.strategy,
                        artifact=world.artifact, budget=Budget(rollouts=60), workers=4, asynchronous=False,
                        store=tmp_path / "run", callbacks=[stream])
    lines = [json.loads(line) for line in (tmp_path / "events" / "run.jsonl").read_text().splitlines()]
    assert len(lines) == stream.written > 0
    kinds = {line["kind"] for line in lines}
    assert {"proposal", "decision", "commit", "finished"} <= kinds
    commits = [line["version"] for line in lines if line["kind"] == "commit"]
    assert commits == list(range(1, len(result.history)))


def test_kinds_filter_and_a_closed_stream_refuses_writes(tmp_path: Path) -> None:
    stream = JsonlEvents(tmp_path / "e.jsonl", kinds={"commit"}, clock=lambda: 1.0)
    stream("decision", {"diff_id": "p1"})
    stream("commit", {"version": 3})
    stream.close()
    assert (tmp_path / "e.jsonl").read_text() == '{"kind": "commit", "at": 1.0, "version": 3}\n'
    with pytest.raises(ValueError, match="closed"):
        stream("commit", {"version": 4})
