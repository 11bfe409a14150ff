"""Pipeline mode: a library whose artifacts form a chain, and blame by counterfactual replay.

Each stage reads one artifact of the library and transforms the previous stage's output (the first stage gets
the task's input). When the final output is wrong, `Pipeline.blame` replays the chain counterfactually: stage i
is run on what a correct upstream would have given it (the task's reference output of stage i - 1, from
``task.meta["stages"]``), and the earliest stage whose output is then still wrong is blamed. The proposal is
asked for that stage's artifact alone, with that stage's input and output, so a downstream symptom never edits
the wrong artifact. Replays call the stage functions directly; they are part of the proposal's cost. `run`
returns the trace of every stage's output as JSON text, and `reward` gives partial credit for the leading stages
that are right, so an upstream fix shows in the evidence before the whole chain is.

>>> pipeline = Pipeline((PipelineStage("plan", plan), PipelineStage("solve", solve)))  # doctest: +SKIP
>>> evolve(tasks, pipeline.reward(score), run=pipeline.run, propose=pipeline.propose(fix),
...        artifact=library)  # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agentgrad.core._checks import function, items
from agentgrad.core.ids import validate_id
from agentgrad.errors import ConfigError

STAGES_FIELD = "stages"
Step = Callable[[str, Any], Any]  # (the stage's rendered artifact, its input) -> its output
Fix = Callable[["Blame"], Any]  # what the proposal for a blamed stage says (a proposal for that artifact)


@dataclass(frozen=True)
class PipelineStage:
    """One link: the artifact it reads, how it maps its input to its output, and how to check an output
    against the stage's reference (equality by default)."""

    artifact: str
    step: Step
    check: Callable[[Any, Any], bool] = lambda output, expected: bool(output == expected)

    def __post_init__(self) -> None:
        validate_id(self.artifact, what="PipelineStage.artifact")
        function(self.step, f"stage {self.artifact!r}: step (rendered, input) -> output")
        function(self.check, f"stage {self.artifact!r}: check (output, expected) -> bool")


@dataclass(frozen=True)
class Blame:
    """The stage a failure is blamed on, with what it was given and gave in the counterfactual replay."""

    stage: str
    rendered: str
    task: Any
    given: Any
    produced: Any
    expected: Any
    replays: int


@dataclass(frozen=True)
class Pipeline:
    """A chain of stages over a library's artifacts (`run`, `reward`, `blame`, `propose` for `evolve`)."""

    stages: tuple[PipelineStage, ...]

    def __post_init__(self) -> None:
        ids = [s.artifact for s in items(self.stages, "Pipeline.stages", PipelineStage)]
        if not ids or len(set(ids)) != len(ids):
            raise ConfigError(f"a pipeline needs stages over distinct artifacts, got {ids}")

    def outputs(self, rendered: Mapping[str, str], task: Any) -> list[tuple[str, Any]]:
        """Every stage's output on `task`, in order, by artifact id."""
        value, outputs = getattr(task, "input", None), []
        for stage in self.stages:
            value = stage.step(rendered[stage.artifact], value)
            outputs.append((stage.artifact, value))
        return outputs

    def run(self, rendered: Mapping[str, str], task: Any) -> str:
        """Run every stage in order (the `run` of `evolve`): the trace of every stage's output, as JSON text
        (`final` reads the last stage's output back out of it)."""
        return json.dumps([[name, str(value)] for name, value in self.outputs(rendered, task)])

    @staticmethod
    def trace(output: str) -> list[tuple[str, str]]:
        """The (stage, output) pairs in the text `run` returned."""
        return [(str(name), str(value)) for name, value in json.loads(output)]

    def final(self, output: str) -> str:
        """The last stage's output in the text `run` returned."""
        return self.trace(output)[-1][1]

    def reward(self, score: Callable[[Any, Any], float]) -> Callable[[Any, Any], float]:
        """A reward for `evolve`: `score(task, final output)`; a wrong answer whose first k stages gave their
        reference outputs earns ``k / n`` (n stages; at most ``(n - 1) / n``) instead, so fixing an upstream stage
        shows in the evidence before the whole chain is right."""
        def pipeline_reward(task: Any, output: Any) -> float:
            outputs = self.trace(output)
            value = float(score(task, outputs[-1][1]))
            references = self._references(task)
            leading = 0
            for stage, (_, produced) in zip(self.stages, outputs, strict=True):
                if stage.artifact not in references or not stage.check(produced, references[stage.artifact]):
                    break
                leading += 1
            return value if value >= 1.0 else max(value, min(leading, len(self.stages) - 1) / len(self.stages))
        return pipeline_reward

    def blame(self, rendered: Mapping[str, str], task: Any) -> Blame:
        """The earliest stage that is wrong when given a correct input (its reference upstream output); the last
        stage when every stage is right on correct input (the error is in how they combine)."""
        references = self._references(task)
        given: Any = getattr(task, "input", None)
        for index, stage in enumerate(self.stages):
            produced = stage.step(rendered[stage.artifact], given)
            expected = references.get(stage.artifact)
            if stage.artifact in references and not stage.check(produced, expected):
                return Blame(stage.artifact, rendered[stage.artifact], task, given, produced, expected, index + 1)
            given = expected if stage.artifact in references else produced
        last = self.stages[-1]
        return Blame(last.artifact, rendered[last.artifact], task, given, produced,
                     references.get(last.artifact, getattr(task, "expected", None)), len(self.stages))

    def propose(self, fix: Fix) -> Callable[[Mapping[str, str], Any, Any, float], Any]:
        """A `propose` for `evolve` that blames a stage and asks `fix(blame)` for an edit of that stage's
        artifact alone (its edits are addressed to that artifact)."""
        def pipeline_propose(rendered: Mapping[str, str], task: Any, output: Any, reward: float) -> Any:
            blame = self.blame(rendered, task)
            return {blame.stage: fix(blame)}
        return pipeline_propose

    @staticmethod
    def _references(task: Any) -> Mapping[str, Any]:
        meta = getattr(task, "meta", {}) or {}
        references = meta.get(STAGES_FIELD, {})
        if not isinstance(references, Mapping):
            raise ConfigError(f"task {getattr(task, 'id', '?')!r}: meta[{STAGES_FIELD!r}] must map stage "
                              "artifact ids to reference outputs")
        return references

