"""`Aggregator`: the stateful shell around a stage pipeline, like a torch optimizer around optax transforms.

It validates the candidates against the context (known artifact, existing base version, sane evidence), runs the
pipeline, lets every stage observe the final verdicts, and returns what to commit. It never writes: committing
the accepted candidates is the store's job (the only write path).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentgrad.core.decision import Decision, Outcome
from agentgrad.core.diff import Diff
from agentgrad.core.evidence import Evidence
from agentgrad.errors import ConfigError, StateDictError
from agentgrad.optim.acceptance import AcceptanceState
from agentgrad.optim.base import Batch, Candidate, Context, Stage, StageState, head_of_diff
from agentgrad.optim.tabu import TabuState, is_tabu


@dataclass(frozen=True)
class StepResult:
    """What one optimizer step decided.

    `accepted` are the candidates to commit (each with its ACCEPTED decision in `decisions`); `held` were sent
    back for more evidence (recheck on the new head, a full held-out check, or later).
    """

    accepted: tuple[Candidate, ...]
    decisions: tuple[Decision, ...]
    held: tuple[Candidate, ...]

    def decision_for(self, diff_id: str) -> Decision:
        """The last decision on `diff_id` in this step."""
        for decision in reversed(self.decisions):
            if decision.diff_id == diff_id:
                return decision
        raise KeyError(diff_id)


def validate(candidate: Candidate, ctx: Context) -> None:
    """Raise a typed error if the candidate names an unknown artifact or version, or unknown tasks."""
    head_of_diff(candidate.diff, ctx)
    if ctx.known_tasks is not None:
        candidate.evidence.check_tasks(ctx.known_tasks)


class Aggregator:
    """Runs a pipeline (usually `recipes.default()`) one step at a time and keeps its state.

    >>> agg = Aggregator(default())  # doctest: +SKIP
    >>> result = agg.step(candidates, Context(heads))  # doctest: +SKIP
    """

    def __init__(self, pipeline: Stage[Any]) -> None:
        self.pipeline = pipeline
        self.state: StageState = pipeline.init()
        self.steps = 0

    def step(self, candidates: Iterable[Candidate], ctx: Context) -> StepResult:
        """Decide on `candidates` given the heads in `ctx`; updates this aggregator's state."""
        batch_in = tuple(candidates)
        seen: set[str] = set()
        for candidate in batch_in:
            validate(candidate, ctx)
            if candidate.diff.id in seen:
                raise ConfigError(f"diff id {candidate.diff.id} appears twice in one step; diff ids must be unique")
            seen.add(candidate.diff.id)
        batch, state = self.pipeline.update(Batch(batch_in), self.state, ctx)
        undecided = {c.diff.id for c in batch.candidates} - {
            d.diff_id for d in batch.decisions if d.outcome is Outcome.ACCEPTED}
        if undecided:
            raise RuntimeError(f"pipeline {self.pipeline.name!r} left {sorted(undecided)} without a verdict")
        self.state = self.pipeline.observe(batch.decisions, state, ctx)
        self.steps += 1
        return StepResult(batch.candidates, batch.decisions, batch.held)

    def refused_before(self, diff: Diff) -> bool:
        """True if the tabu stage remembers turning down the same change (`optim.tabu`): a new proposal of it is
        skipped before any evaluation."""
        return any(isinstance(state, TabuState) and is_tabu(state, diff)
                   for state in getattr(self.state, "states", ()))

    def replication_tried(self, evidence: Evidence) -> int:
        """The failed replication tests the acceptance stage counts against `evidence` (`AcceptanceState.tried`:
        its replication test runs at 1/(k + 1) of the look's level); 0 without such a stage."""
        return max((state.tried(evidence) for state in getattr(self.state, "states", ())
                    if isinstance(state, AcceptanceState)), default=0)

    def observe(self, decisions: Sequence[Decision], ctx: Context) -> None:
        """Let every stage learn from verdicts reached outside a step (a gate's screen, a revert)."""
        self.state = self.pipeline.observe(decisions, self.state, ctx)

    def state_dict(self) -> dict[str, Any]:
        """A JSON-ready snapshot of the aggregator (no live objects)."""
        return {"pipeline": self.pipeline.name, "steps": self.steps, "state": self.state.to_dict()}

    def load_state_dict(self, data: Mapping[str, Any]) -> None:
        """Restore a snapshot; validates it fully before changing anything."""
        if data.get("pipeline") != self.pipeline.name:
            raise StateDictError(f"state dict is for pipeline {data.get('pipeline')!r}, not {self.pipeline.name!r}")
        json.dumps(data)  # must be plain JSON: refuse live objects early
        state = self.pipeline.load(data["state"])
        steps = data.get("steps", 0)
        if not isinstance(steps, int) or steps < 0:
            raise StateDictError(f"steps must be a non-negative int, got {steps!r}")
        self.state, self.steps = state, steps
