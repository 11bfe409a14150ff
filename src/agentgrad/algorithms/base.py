"""What every recipe shares: a traced solver, a reflector model, and one way onto the engine.

A recipe is a published method written as a configuration of the one engine: its proposer (a `RecipeAgent`
subclass: the method's prompts, memory and selection of what to build on), its strategy (how a proposal becomes
diff ops) and its run settings (gate strictness, trust region, workers). The runtime, the store, the budgets and
the acceptance test are the engine's, in both runtimes: ``asynchronous=False`` runs the method's rounds as
published, ``asynchronous=True`` runs it barrier-free (the FlashEvolve design).

A recipe never reaches into the engine. Its agent sees the run through three seams: its own `run` (the solver,
traced into a `TraceLog`), its own `reward` (which scores those traces), and `observe`, an `evolve` callback that
receives the run's events (proposals and verdicts).
"""

from __future__ import annotations

import inspect
import json
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agentgrad.algorithms.traces import TraceLog
from agentgrad.core.artifact import Artifact
from agentgrad.core.library import Library, pack
from agentgrad.data.splits import Splits
from agentgrad.data.task import Task
from agentgrad.errors import ConfigError, StateDictError
from agentgrad.providers.base import Message, Provider, Usage
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.config import RunConfig, Workers
from agentgrad.runtime.evolve import evolve
from agentgrad.runtime.result import Result
from agentgrad.strategies.base import Strategy

Solver = Callable[[Any, Task], Any]  # the agent being improved: (rendered artifact, task) -> output (maybe async)
Reward = Callable[[Task, Any], float]
Callback = Callable[[str, Mapping[str, Any]], None]
_FENCE = re.compile(r"```(?:[a-zA-Z0-9_-]*)\n(.*?)```", re.DOTALL)


def fenced(reply: str) -> str:
    """The text in the last ``` block of `reply` (GEPA's answer format), else the reply itself, stripped."""
    blocks = _FENCE.findall(reply)
    return (blocks[-1] if blocks else reply).strip()


def text_of(rendered: Any) -> str:
    """One text for what the agent saw: the text itself, or a library's texts packed."""
    if isinstance(rendered, str):
        return rendered
    if isinstance(rendered, Mapping):
        return pack({str(k): str(v) for k, v in rendered.items()})
    raise ConfigError(f"a rendered artifact is a text or a mapping of texts, got {type(rendered).__name__}")


def output_text(output: Any) -> str:
    """The text of what `run` returned (a string, or an object with `.text`)."""
    return output if isinstance(output, str) else str(getattr(output, "text", output))


@dataclass(frozen=True)
class Reply:
    """A proposal with what asking for it cost (the runtime charges `.usage` to the token and cost budgets)."""

    text: Any
    usage: Usage = field(default_factory=Usage)


class RecipeAgent:
    """The base of a recipe's agent: `run` (the solver, traced), `reward` (scores the traces), `ask` (one call of
    the reflector model), `observe` (the run's events), and `propose`, which each method writes.

    Args:
        solver: the agent being improved, `(rendered, task) -> output`, plain or async.
        reflector: the model that writes proposals (a recipe without one proposes without a model).
        seed: seeds the recipe's own choices (which candidate to build on, which examples to show).
        params: extra parameters of every reflector call (temperature, max_tokens, ...).
    State: the trace log, the random state and the number of reflector calls (`state_dict`).
    """

    name = "recipe"

    def __init__(self, solver: Solver, reflector: Provider | None = None, *, seed: int = 0,
                 params: Mapping[str, Any] | None = None) -> None:
        if not callable(solver):
            raise ConfigError(f"{self.name}: the solver must be a function (rendered, task) -> output")
        self.solver, self.reflector, self.params = solver, reflector, dict(params or {})
        self.log = TraceLog()
        self.rng = random.Random(seed)
        self.asked = 0

    async def run(self, rendered: Any, task: Task) -> Any:
        """The solver's answer, traced."""
        output = self.solver(rendered, task)
        if inspect.isawaitable(output):
            output = await output
        if output is not None:
            self.log.ran(text_of(rendered), task.id, output_text(output))
        return output

    def reward(self, score: Reward) -> Reward:
        """`score` as the run's reward, recording each score in the trace log."""
        def traced(task: Task, output: Any) -> float:
            value = float(score(task, output))
            self.log.scored(task.id, output_text(output), value)
            return value
        return traced

    async def ask(self, prompt: str, *, system: str | None = None, extra: Mapping[str, Any] | None = None) -> Reply:
        """One reflector call: its reply text and usage; `ConfigError` if the recipe has no reflector. `extra`:
        parameters of this call only (over `params`), such as a ``response_format``."""
        if self.reflector is None:
            raise ConfigError(f"{self.name}: this recipe needs a reflector model (reflector= or model=)")
        messages = ([Message("system", system)] if system else []) + [Message("user", prompt)]
        self.asked += 1
        completion = await self.reflector.complete(messages, **{**self.params, **(extra or {})})
        return Reply(completion.text, completion.usage)

    async def propose(self, rendered: Any, task: Task, output: Any, reward: float) -> Any:
        """The method's proposal for a failed example."""
        raise NotImplementedError

    def observe(self, kind: str, payload: Mapping[str, Any]) -> None:
        """An event of the run (an `evolve` callback); a recipe that keeps a history or an archive reads here."""

    def state_dict(self) -> dict[str, Any]:
        return {"log": self.log.state_dict(), "asked": self.asked, "rng": json.dumps(self.rng.getstate())}

    def load_state_dict(self, data: Mapping[str, Any]) -> None:
        try:
            state = json.loads(data["rng"])
            self.rng.setstate((state[0], tuple(state[1]), state[2]))
            self.asked = int(data["asked"])
        except (KeyError, TypeError, ValueError) as exc:
            raise StateDictError(f"{self.name}: malformed recipe state ({exc})") from exc
        self.log.load_state_dict(data["log"])


@dataclass(frozen=True)
class Recipe:
    """A method on the engine: its agent, its strategy and its run settings (`RunConfig` and default budget)."""

    name: str
    agent: RecipeAgent
    strategy: Strategy | Mapping[str, Strategy]
    config: RunConfig = field(default_factory=RunConfig)
    budget: Budget = field(default_factory=lambda: Budget(calls=300))

    def evolve(self, tasks: Sequence[Task] | Splits, reward: Reward, *,
               artifact: Artifact | Library | Mapping[str, Artifact | str] | str | None = None,
               budget: Budget | None = None, asynchronous: bool | None = None, workers: int | Workers | None = None,
               store: str | Path | None = None, seed: int | None = None,
               callbacks: Sequence[Callback] = ()) -> Result:
        """Run the method on the engine: `evolve` with the recipe's agent, strategy and settings."""
        config = self.config if asynchronous is None else replace(self.config, asynchronous=asynchronous)
        return evolve(tasks, self.agent.reward(reward), run=self.agent.run, propose=self.agent.propose,
                      strategy=self.strategy, artifact=artifact, budget=budget or self.budget, workers=workers,
                      store=store, seed=seed, config=config, callbacks=[*callbacks, self.agent.observe])



def resolve(run: Solver | None, model: str | Provider | None, reflector: str | Provider | None, *,
            solve_params: Mapping[str, Any] | None = None) -> tuple[Solver, Provider | None]:
    """The solver and the reflector of a recipe: `run` (yours), or `model` answering with the artifact as its
    system prompt (with `solve_params`, e.g. temperature and max_tokens, on every solving call); the reflector is
    `reflector`, else `model`'s provider (None when neither is given)."""
    from agentgrad.agents.llm import LLMAgent
    from agentgrad.agents.skill import resolve_model

    provider = None if model is None else resolve_model(model) if isinstance(model, str) else model
    writer = None if reflector is None else resolve_model(reflector) if isinstance(reflector, str) else reflector
    if run is None:
        if provider is None:
            raise ConfigError("a recipe needs run= (your agent) or model= (a model that answers with the artifact "
                              "as its system prompt)")
        run = LLMAgent(provider, params=dict(solve_params or {})).run
    return run, writer or provider
