"""SkillOpt (Yang et al., 2026, "SkillOpt: Executive Strategy for Self-Evolving Agent Skills") as a recipe.

A separate optimizer model reads failed rollouts of the current skill and proposes bounded add / delete / replace
edits; a textual learning rate (the most edits one step may apply) decays on a schedule (cosine, 4 to 2 by
default, as in the released code), and the edits past it are clipped. A candidate is committed only after a
strict check on the whole held-out validation split (no screen, no sampled plan, no early stop), and the edits of
a rejected candidate are shown to every later reflection as a rejected-edit buffer. The edits become diff ops
through `AppendRules` (line units); the engine's `TrustRegion` caps every diff at the schedule's largest budget.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

from agentgrad.algorithms.base import Callback, Recipe, RecipeAgent, Reply, Reward, Solver, output_text, resolve
from agentgrad.core.artifact import Artifact
from agentgrad.core.library import Library
from agentgrad.data.splits import Splits
from agentgrad.data.task import Task
from agentgrad.errors import ConfigError, InvalidProposalError, StateDictError
from agentgrad.optim.schedules import Schedule
from agentgrad.optim.trust_region import TrustRegion
from agentgrad.providers.base import Provider
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.config import Acceptance, RunConfig, Workers
from agentgrad.runtime.gateconfig import GateConfig
from agentgrad.runtime.result import Result
from agentgrad.strategies.rules import AppendRules

ACTIONS = {"append": "add", "insert_after": "add", "replace": "replace", "delete": "delete"}
FINAL = {"accepted", "rejected", "stale", "conflict", "fused", "dropped", "duplicate", "tabu", "refused",
         "too_large", "reverted"}
POOL = 64  # the most failed training tasks remembered for minibatches


@dataclass(frozen=True)
class Cosine:
    """A cosine-annealed schedule from `start` (step 0) to `end` (step `steps` and after): SkillOpt's default
    edit budget. Implements `agentgrad.optim.schedules.Schedule`."""

    start: float = 4.0
    end: float = 2.0
    steps: int = 16

    def __post_init__(self) -> None:
        if self.steps < 1 or min(self.start, self.end) < 1:
            raise ConfigError(f"skillopt: a cosine budget needs steps >= 1 and values >= 1, got {self}")

    def __call__(self, step: int) -> float:
        t = min(max(step, 0), self.steps) / self.steps
        return self.end + 0.5 * (self.start - self.end) * (1 + math.cos(math.pi * t))

    def bounds(self) -> tuple[float, float]:
        return min(self.start, self.end), max(self.start, self.end)

    def to_dict(self) -> dict[str, Any]:
        return {"name": "cosine", "start": self.start, "end": self.end, "steps": self.steps}


@dataclass(frozen=True)
class Failure:
    """A failed training task as the reflection sees it."""

    task_id: str
    input: str
    output: str
    expected: str


def edits_of(reply: str) -> list[dict[str, str]]:
    """SkillOpt's JSON edits in `reply`, as agentgrad structured edits; `InvalidProposalError` when there are none."""
    start, end = reply.find("{"), reply.rfind("}")
    try:
        data = json.loads(reply[start:end + 1]) if 0 <= start < end else None
    except json.JSONDecodeError as exc:
        raise InvalidProposalError(f"skillopt: the reply is not JSON ({exc})") from exc
    raw = data.get("edits") if isinstance(data, dict) else None
    if not isinstance(raw, list):
        raise InvalidProposalError("skillopt: the reply holds no 'edits' list")
    edits = []
    for item in raw:
        if not isinstance(item, dict) or item.get("op") not in ACTIONS:
            raise InvalidProposalError(f"skillopt: an edit needs an op among {sorted(ACTIONS)}, got {item!r}")
        edit = {"action": ACTIONS[item["op"]]}
        edit.update({k: str(item[k]) for k in ("content", "target") if item.get(k)})
        edits.append(edit)
    return edits


class SkillOptAgent(RecipeAgent):
    """SkillOpt's optimizer: reflect on a minibatch of failures, propose at most `budget(step)` bounded edits.

    Args:
        solver, reflector, seed, params: see `RecipeAgent`.
        budget: the textual learning rate, a `Schedule` of the most edits per step (step = verdicts so far).
        max_edit_chars: an edit with a longer content is dropped (a bounded edit).
        minibatch: failed training tasks shown per reflection (the current one and recent ones the skill still
            fails, read from the trace log).
        buffer: the most rejected candidates shown to the reflection.
    State: the step, the rejected-edit buffer, the pending candidates and the failure pool (`state_dict`).
    """

    name = "skillopt"

    def __init__(self, solver: Solver, reflector: Provider | None = None, *, seed: int = 0,
                 params: Mapping[str, Any] | None = None, budget: Schedule | None = None,
                 max_edit_chars: int = 400, minibatch: int = 8, buffer: int = 8) -> None:
        super().__init__(solver, reflector, seed=seed, params=params)
        if min(max_edit_chars, minibatch, buffer) < 1:
            raise ConfigError("skillopt: max_edit_chars, minibatch and buffer must be >= 1")
        self.budget = budget or Cosine()
        self.max_edit_chars, self.minibatch, self.buffer = max_edit_chars, minibatch, buffer
        self.step = 0
        self.rejected: list[list[str]] = []  # the edit texts of rejected candidates, oldest first
        self.pending: dict[str, list[str]] = {}  # diff id -> its edit texts
        self.pool: dict[str, Failure] = {}
        self.template = Template(resources.files("agentgrad.algorithms").joinpath(
            "prompts/skillopt_reflect.md").read_text("utf-8"))

    def learning_rate(self) -> int:
        """The edit budget of the current step."""
        return max(1, round(self.budget(self.step)))

    async def propose(self, rendered: Any, task: Task, output: Any, reward: float) -> Reply:
        """Reflect on the failures, then clip the edits to the step's budget."""
        if not isinstance(rendered, str):
            raise ConfigError("skillopt evolves one artifact (a text); a library of artifacts is not supported")
        self._remember(task, output)
        budget = self.learning_rate()
        reply = await self.ask(self.prompt(rendered, task, budget))
        bounded = [e for e in edits_of(str(reply.text)) if len(e.get("content", "")) <= self.max_edit_chars]
        if not bounded:
            raise InvalidProposalError("skillopt: no edit within the size bound")
        return Reply(bounded[:budget], reply.usage)

    def prompt(self, skill: str, task: Task, budget: int) -> str:
        """The reflection prompt for `skill`, led by the failure on `task`."""
        failures = "\n\n".join(f"input: {f.input}\nagent answer: {f.output}\nexpected answer: {f.expected}"
                               for f in self.minibatch_of(skill, task))
        rejected = "\n".join(f"- step turned down: {' | '.join(edits)}" for edits in self.rejected[-self.buffer:])
        return self.template.substitute(budget=budget, skill=skill or "(empty)", failures=failures,
                                        rejected=rejected or "(none yet)")

    def minibatch_of(self, skill: str, task: Task) -> list[Failure]:
        """The failure on `task` and up to `minibatch - 1` remembered tasks the skill still fails (trace log)."""
        failing = {t.task_id: t.output for t in self.log.traces(skill) if t.score is not None and t.score < 1.0}
        others = sorted(k for k in failing if k in self.pool and k != task.id)
        picked = self.rng.sample(others, min(len(others), self.minibatch - 1))
        lead = self.pool.get(task.id) or Failure(task.id, str(task.input), "", str(task.expected))
        return [lead, *(Failure(k, self.pool[k].input, failing[k], self.pool[k].expected)
                                      for k in picked)]

    def _remember(self, task: Task, output: Any) -> None:
        self.pool.pop(task.id, None)
        self.pool[task.id] = Failure(task.id, str(task.input), "" if output is None else output_text(output),
                                     str(task.expected))
        while len(self.pool) > POOL:
            del self.pool[next(iter(self.pool))]

    def observe(self, kind: str, payload: Mapping[str, Any]) -> None:
        """Each final verdict is one step; a rejected candidate's edits join the buffer."""
        if kind == "proposal":
            ops = payload["diff"]["ops"]
            self.pending[str(payload["diff"]["id"])] = [str(o.get("new") or o.get("old") or "") for o in ops]
        elif kind == "decision" and payload.get("outcome") in FINAL:
            edits = self.pending.pop(str(payload["diff_id"]), None)
            if edits is None:
                return
            self.step += 1
            if payload["outcome"] != "accepted":
                self.rejected = [*self.rejected, edits][-self.buffer:]

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "step": self.step, "rejected": [list(e) for e in self.rejected],
                "pending": {k: list(v) for k, v in self.pending.items()},
                "pool": [[f.task_id, f.input, f.output, f.expected] for f in self.pool.values()]}

    def load_state_dict(self, data: Mapping[str, Any]) -> None:
        super().load_state_dict(data)
        try:
            step = int(data["step"])
            rejected = [[str(e) for e in edits] for edits in data["rejected"]]
            pending = {str(k): [str(e) for e in v] for k, v in data["pending"].items()}
            pool = {str(i): Failure(str(i), str(x), str(o), str(e)) for i, x, o, e in data["pool"]}
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise StateDictError(f"skillopt: malformed state ({exc})") from exc
        self.step, self.rejected, self.pending, self.pool = step, rejected, pending, pool


def strict_config(budget: Schedule, max_edit_chars: int, seed: int, delta: float) -> RunConfig:
    """One candidate per step, the whole validation split for each (no screen, no early stop), ties rejected
    (margin 0), and a trust region at the schedule's largest budget."""
    most = math.ceil(budget.bounds()[1])
    gate = GateConfig(screen=False, early_stop=False, max_examples=None, futility=0.0, focus=0, pool="val")
    return RunConfig(workers=Workers(rollout=1, propose=1, gate=1), gate=gate, asynchronous=False, seed=seed,
                     acceptance=Acceptance(delta=delta, margin=0.0, looks=1),
                     trust_region=TrustRegion(max_ops=most, max_chars=2 * most * max_edit_chars), max_batch=1)


def recipe(*, run: Solver | None = None, model: str | Provider | None = None,
           reflector: str | Provider | None = None, seed: int = 0, budget: Schedule | None = None,
           max_edit_chars: int = 400, minibatch: int = 8, buffer: int = 8, delta: float = 0.1,
           params: Mapping[str, Any] | None = None, solve_params: Mapping[str, Any] | None = None) -> Recipe:
    """SkillOpt on the engine: bounded line edits (`AppendRules`) under a decaying edit budget (`budget`, a
    `Schedule`; `Cosine()` by default), a strict gate at risk `delta`. `params` go to the optimizer model's calls,
    `solve_params` to the model's solving calls (with `model=`)."""
    solver, writer = resolve(run, model, reflector, solve_params=solve_params)
    schedule = budget or Cosine()
    agent = SkillOptAgent(solver, writer, seed=seed, params=params, budget=schedule, max_edit_chars=max_edit_chars,
                          minibatch=minibatch, buffer=buffer)
    return Recipe("skillopt", agent, AppendRules(), strict_config(schedule, max_edit_chars, seed, delta),
                  Budget(calls=300))


def skillopt(tasks: Sequence[Task] | Splits, reward: Reward, *, run: Solver | None = None,
             model: str | Provider | None = None, reflector: str | Provider | None = None,
             artifact: Artifact | Library | Mapping[str, Artifact | str] | str | None = None,
             budget: Budget | None = None, asynchronous: bool = False, workers: int | Workers | None = None,
             store: str | Path | None = None, seed: int = 0, learning_rate: Schedule | None = None,
             max_edit_chars: int = 400, minibatch: int = 8, buffer: int = 8, delta: float = 0.1,
             params: Mapping[str, Any] | None = None, solve_params: Mapping[str, Any] | None = None,
             callbacks: Sequence[Callback] = ()) -> Result:
    """Run SkillOpt: see `recipe` for the options (`learning_rate` is its `budget`) and
    `docs/concepts/algorithms/skillopt.md`."""
    return recipe(run=run, model=model, reflector=reflector, seed=seed, budget=learning_rate,
                  max_edit_chars=max_edit_chars, minibatch=minibatch, buffer=buffer, delta=delta, params=params,
                  solve_params=solve_params).evolve(
        tasks, reward, artifact=artifact, budget=budget, asynchronous=asynchronous, workers=workers, store=store,
        seed=seed, callbacks=callbacks)
