"""SkillNEO (non-elitist skill evolution) as a recipe on the engine.

Two versions of the skill are kept apart: the *use* version, the best validated one, which is what the run serves
(the engine's head: it moves only when a candidate beats it at the gate), and the *keep improving* lineage, the
latest proposed candidate, whatever its verdict. Every proposal builds on the lineage's latest member, even when
it scored below the use version, so a line of edits whose first steps do not pay off on their own can still reach
a better skill; it is returned as a whole-text replacement (`WholeText`) and the engine's acceptance decides
whether it beats the use version. After `patience` rejections in a row the lineage restarts from the use
version; a candidate gone stale while the head moved is re-anchored as the same whole text. (The published
details could not be found; `docs/concepts/algorithms/skillneo.md` lists what is assumed.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

from agentgrad.algorithms.base import Callback, Recipe, RecipeAgent, Reply, Reward, Solver, fenced, output_text, resolve
from agentgrad.core.artifact import Artifact
from agentgrad.core.library import Library
from agentgrad.data.splits import Splits
from agentgrad.data.task import Task
from agentgrad.errors import ConfigError, InvalidProposalError, StateDictError
from agentgrad.providers.base import Provider
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.config import RunConfig, Staleness, StalePolicy, Workers
from agentgrad.runtime.result import Result
from agentgrad.strategies.whole import WholeText

LOST = ("rejected", "conflict")  # the verdicts of a candidate that did not beat the use version
POOL = 64  # the most failed training tasks remembered


@dataclass(frozen=True)
class Failure:
    """A failed training task: its input, what the agent answered, the expected answer."""

    input: str
    output: str
    expected: str


class SkillNeoAgent(RecipeAgent):
    """SkillNEO's proposer: improve the lineage's latest member, whatever its score; the gate guards the use one.

    Args:
        solver, reflector, seed, params: see `RecipeAgent`.
        patience: rejections in a row after which the lineage restarts from the use version (0: never).
        minibatch: failed training tasks shown per proposal.
    State: the lineage's latest member, the use version, the rejection streak, the candidates awaiting a verdict
    and the failure pool (`state_dict`).
    """

    name = "skillneo"

    def __init__(self, solver: Solver, reflector: Provider | None = None, *, seed: int = 0,
                 params: Mapping[str, Any] | None = None, patience: int = 3, minibatch: int = 4) -> None:
        super().__init__(solver, reflector, seed=seed, params=params)
        if patience < 0 or minibatch < 1:
            raise ConfigError("skillneo: patience must be >= 0 and minibatch >= 1")
        self.patience, self.minibatch = patience, minibatch
        self.tip: str | None = None  # the lineage's latest member (None: start from the head)
        self.served: str | None = None  # the use version as last accepted (None: the starting skill)
        self.streak = 0
        self.pending: dict[str, str] = {}  # diff id -> the candidate's whole text
        self.pool: dict[str, Failure] = {}
        self.template = Template(resources.files("agentgrad.algorithms").joinpath(
            "prompts/skillneo_improve.md").read_text("utf-8"))

    def base(self, head: str) -> str:
        """The text the next proposal builds on: the lineage's latest member, else the use version `head`."""
        return head if self.tip is None else self.tip

    async def propose(self, rendered: Any, task: Task, output: Any, reward: float) -> Reply:
        """A whole new skill built on the lineage's latest member."""
        if not isinstance(rendered, str):
            raise ConfigError("skillneo evolves one artifact (a text); a library of artifacts is not supported")
        self._remember(task, output)
        reply = await self.ask(self.prompt(rendered, task))
        return Reply(fenced(str(reply.text)), reply.usage)

    def repair(self, diff: Mapping[str, Any], head: str) -> str:
        """A candidate gone stale is the same whole text on the new head (it never depended on the old one)."""
        ops = diff.get("ops") or []
        if len(ops) != 1 or ops[0].get("new") is None:
            raise InvalidProposalError("skillneo: only a whole-text candidate can be re-anchored")
        return str(ops[0]["new"])

    def prompt(self, head: str, task: Task) -> str:
        """The improvement prompt for the lineage's latest member, led by the failure on `task`."""
        base = self.base(head)
        failures = "\n\n".join(f"input: {f.input}\nagent answer: {f.output}\nexpected answer: {f.expected}"
                               for f in self._failures(base, task))
        return self.template.substitute(skill=base or "(empty)", failures=failures,
                                        scores=f"this one {self._mean(base)}, the one in use {self._mean(head)}")

    def _failures(self, base: str, task: Task) -> list[Failure]:
        lead = self.pool.get(task.id) or Failure(str(task.input), "", str(task.expected))
        failing = {t.task_id: t.output for t in self.log.traces(base) if t.score is not None and t.score < 1.0}
        others = sorted(k for k in failing if k in self.pool and k != task.id)
        picked = self.rng.sample(others, min(len(others), self.minibatch - 1))
        return [lead, *(Failure(self.pool[k].input, failing[k], self.pool[k].expected) for k in picked)]

    def _mean(self, text: str) -> str:
        scores = self.log.scores(text)
        return f"{sum(scores.values()) / len(scores):.2f} on {len(scores)} tasks" if scores else "not scored yet"

    def _remember(self, task: Task, output: Any) -> None:
        self.pool.pop(task.id, None)
        self.pool[task.id] = Failure(str(task.input), "" if output is None else output_text(output),
                                     str(task.expected))
        while len(self.pool) > POOL:
            del self.pool[next(iter(self.pool))]

    def observe(self, kind: str, payload: Mapping[str, Any]) -> None:
        """A proposed candidate becomes the lineage's latest member, whatever its verdict will be; an accepted one
        also becomes the use version; `patience` lost verdicts in a row restart the lineage from the use version."""
        if kind == "proposal":
            ops = payload["diff"]["ops"]
            if len(ops) == 1 and ops[0].get("new") is not None:
                self.pending[str(payload["diff"]["id"])] = str(ops[0]["new"])
                self.tip = self.pending[str(payload["diff"]["id"])]
        elif kind == "decision" and payload.get("outcome") in ("accepted", *LOST):
            text = self.pending.pop(str(payload["diff_id"]), None)
            if text is not None:
                self._judged(text, payload["outcome"] == "accepted")

    def _judged(self, text: str, accepted: bool) -> None:
        if accepted:
            self.served, self.streak = text, 0
            return
        self.streak += 1
        if self.patience and self.streak >= self.patience:
            self.tip, self.streak = self.served, 0  # restart the lineage from the use version

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "tip": self.tip, "served": self.served, "streak": self.streak,
                "pending": dict(self.pending),
                "pool": {k: [f.input, f.output, f.expected] for k, f in self.pool.items()}}

    def load_state_dict(self, data: Mapping[str, Any]) -> None:
        super().load_state_dict(data)
        try:
            tip, served = data["tip"], data["served"]
            if not all(v is None or isinstance(v, str) for v in (tip, served)):
                raise TypeError("tip and served must be texts or None")
            streak = int(data["streak"])
            pending = {str(k): str(v) for k, v in data["pending"].items()}
            pool = {str(k): Failure(str(i), str(o), str(e)) for k, (i, o, e) in data["pool"].items()}
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise StateDictError(f"skillneo: malformed state ({exc})") from exc
        self.tip, self.served, self.streak, self.pending, self.pool = tip, served, streak, pending, pool


def recipe(*, run: Solver | None = None, model: str | Provider | None = None,
           reflector: str | Provider | None = None, seed: int = 0, patience: int = 3, minibatch: int = 4,
           params: Mapping[str, Any] | None = None, solve_params: Mapping[str, Any] | None = None) -> Recipe:
    """SkillNEO on the engine: whole-text proposals on the lineage, the engine's gate guarding the use version.
    `params` go to the writer model's calls, `solve_params` to the model's solving calls (with `model=`)."""
    solver, writer = resolve(run, model, reflector, solve_params=solve_params)
    agent = SkillNeoAgent(solver, writer, seed=seed, params=params, patience=patience, minibatch=minibatch)
    config = RunConfig(workers=Workers(rollout=2, propose=2, gate=2), asynchronous=False, seed=seed,
                       staleness=Staleness(policy=StalePolicy.REPAIR, repair=agent.repair))
    return Recipe("skillneo", agent, WholeText(), config, Budget(calls=300))


def skillneo(tasks: Sequence[Task] | Splits, reward: Reward, *, run: Solver | None = None,
             model: str | Provider | None = None, reflector: str | Provider | None = None,
             artifact: Artifact | Library | Mapping[str, Artifact | str] | str | None = None,
             budget: Budget | None = None, asynchronous: bool = False, workers: int | Workers | None = None,
             store: str | Path | None = None, seed: int = 0, patience: int = 3, minibatch: int = 4,
             params: Mapping[str, Any] | None = None, solve_params: Mapping[str, Any] | None = None,
             callbacks: Sequence[Callback] = ()) -> Result:
    """Run SkillNEO: see `recipe` for the options and `docs/concepts/algorithms/skillneo.md`."""
    return recipe(run=run, model=model, reflector=reflector, seed=seed, patience=patience, minibatch=minibatch,
                  params=params, solve_params=solve_params).evolve(tasks, reward, artifact=artifact, budget=budget,
                                              asynchronous=asynchronous, workers=workers, store=store, seed=seed,
                                              callbacks=callbacks)
