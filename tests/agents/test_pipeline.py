"""Pipeline mode: a failure is blamed on the earliest stage that is wrong on a correct input, and only that
stage's artifact is edited."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentgrad import Budget, evolve
from agentgrad.agents.pipeline import Pipeline, PipelineStage
from agentgrad.errors import ConfigError, InvalidIdError
from agentgrad.testing.pipeline_world import PIPELINE, RULES, fix, library, present, score, tasks


def test_blame_falls_on_the_earliest_stage_wrong_on_a_correct_input() -> None:
    task = tasks()[0]  # please compute: 1+2 -> 1+2 -> 3 -> answer: 3
    nothing = {"extract": "", "solve": "", "format": ""}
    assert PIPELINE.blame(nothing, task).stage == "extract"
    extract_ok = {**nothing, "extract": RULES["extract"]}
    blame = PIPELINE.blame(extract_ok, task)
    assert blame.stage == "solve" and blame.given == "1+2" and blame.expected == "3"
    assert PIPELINE.blame({**extract_ok, "solve": RULES["solve"]}, task).stage == "format"


def test_a_broken_upstream_is_blamed_although_the_symptom_is_downstream() -> None:
    task = tasks()[0]
    rendered = {"extract": "", "solve": RULES["solve"], "format": RULES["format"]}
    assert PIPELINE.final(PIPELINE.run(rendered, task)) == "answer: ?"
    assert [name for name, _ in PIPELINE.outputs(rendered, task)] == ["extract", "solve", "format"]
    assert PIPELINE.blame(rendered, task).stage == "extract"


def test_a_pipeline_run_learns_each_stage_from_blamed_failures(tmp_path: Path) -> None:
    result = evolve(tasks(), PIPELINE.reward(score), run=PIPELINE.run, propose=PIPELINE.propose(fix),
                    artifact=library(), budget=Budget(calls=600), workers=4, store=tmp_path / "run", seed=0)
    assert result.ok, result.error
    texts = {k: a.text for k, a in result.artifacts.items()}
    assert all(RULES[stage] in texts[stage] for stage in RULES)
    assert result.test_reward is not None and result.test_reward > (result.baseline_test_reward or 0.0)
    for version in result.history[1:]:
        assert version.diff_id is not None


def test_a_pipeline_needs_distinct_stages() -> None:
    with pytest.raises(ConfigError, match="distinct"):
        Pipeline((PipelineStage("a", present), PipelineStage("a", present)))


@pytest.mark.parametrize(("make", "error", "says"), [
    (lambda: Pipeline(None),  # type: ignore[arg-type]
     ConfigError, r"^Pipeline.stages must be a sequence of PipelineStage values, got NoneType$"),
    (lambda: Pipeline((1,)),  # type: ignore[arg-type]
     ConfigError, r"^Pipeline.stages must hold only PipelineStage values, got int at index 0$"),
    (lambda: PipelineStage(None, present),  # type: ignore[arg-type]
     InvalidIdError, r"^PipelineStage.artifact must be a string, got NoneType$"),
    (lambda: PipelineStage("a", 3),  # type: ignore[arg-type]
     ConfigError, r"^stage 'a': step \(rendered, input\) -> output must be a function"),
    (lambda: PipelineStage("a", present, check=3),  # type: ignore[arg-type]
     ConfigError, r"^stage 'a': check .* must be a function, got int$"),
], ids=["stages-none", "stages-ints", "artifact-none", "step-not-callable", "check-not-callable"])
def test_a_pipeline_of_the_wrong_shape_is_refused_when_it_is_built(make: Callable[[], Any], error: type[Exception],
                                                                   says: str) -> None:
    with pytest.raises(error, match=says):
        make()


def test_the_reward_credits_the_leading_stages_that_are_right() -> None:
    task = tasks()[0]
    reward = PIPELINE.reward(score)
    nothing = {"extract": "", "solve": "", "format": ""}
    assert reward(task, PIPELINE.run(nothing, task)) == 0.0
    assert reward(task, PIPELINE.run({**nothing, "extract": RULES["extract"]}, task)) == pytest.approx(1 / 3)
    right = dict(RULES)
    assert reward(task, PIPELINE.run(right, task)) == 1.0
