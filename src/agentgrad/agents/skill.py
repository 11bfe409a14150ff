"""`evolve_skill()`: evolve the skill (system prompt) a model follows on a dataset of rows, in one call."""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import anyio

from agentgrad.agents.llm import LLMAgent
from agentgrad.core.artifact import Artifact, Kind
from agentgrad.data.scorers import Scorer, get_scorer
from agentgrad.data.splits import split
from agentgrad.data.task import Task, tasks_from_rows
from agentgrad.errors import ConfigError, RewardError
from agentgrad.providers.base import Provider
from agentgrad.providers.middleware import Accounting, ConcurrencyLimit, Meter, Retry, wrap
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.evolve import evolve
from agentgrad.runtime.result import Result
from agentgrad.strategies.rules import AppendRules


def default_model() -> str:
    """The model `make demo` and `evolve_skill` use when none is named: a hosted one if its key is set, else local."""
    if os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"):
        return "openai:" + os.environ.get("AGENTGRAD_MODEL", "gpt-4o-mini")
    if os.environ.get("ANTHROPIC_API_KEY"):
        return "anthropic:" + os.environ.get("AGENTGRAD_MODEL", "claude-haiku-4-5")
    return "local"


def resolve_model(model: str | Provider, *, concurrency: int = 16) -> Provider:
    """A provider for `model`: "local[:name-or-path]", "openai:<model>", "anthropic:<model>", or a Provider.

    Named models get the standard middleware: pricing from the default price table (so cost budgets bind), a
    concurrency limit, and one retry budget per call.
    """
    if not isinstance(model, str):
        return model
    kind, _, name = model.partition(":")
    provider: Provider
    if kind == "local":
        from agentgrad.providers.local import local  # optional extra: agentgrad[local]
        provider = local(name or None, n_parallel=min(concurrency, 8))
    elif kind == "openai" and name:
        from agentgrad.providers.openai_compat import OpenAICompatible
        provider = OpenAICompatible(os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1"),
                                    api_key=os.environ.get("OPENAI_API_KEY"), model=name)
    elif kind == "anthropic" and name:
        from agentgrad.providers.anthropic import Anthropic
        provider = Anthropic(model=name, api_key=os.environ.get("ANTHROPIC_API_KEY"),
                             base_url=os.environ.get("ANTHROPIC_BASE_URL"))
    else:
        raise ConfigError(f"unknown model {model!r}: use 'local', 'local:<gguf path>', 'openai:<model>', "
                          "'anthropic:<model>' or a Provider")
    meter = Meter()
    return wrap(provider, lambda p: Accounting(p, meter), lambda p: ConcurrencyLimit(p, concurrency), Retry)


def scoring(score: str | Scorer) -> Callable[[Task, str], float]:
    """A reward function (task, output) -> [0, 1] from a scorer name or function."""
    scorer = get_scorer(score)

    def reward(task: Task, output: str) -> float:
        if task.expected is None:
            raise RewardError(f"task {task.id!r} has no gold answer to score against")
        return float(scorer(output, task.expected))
    return reward


async def _close(provider: Any) -> None:
    for name in ("aclose", "close"):
        method = getattr(provider, name, None)
        if callable(method):
            outcome = method()
            if inspect.isawaitable(outcome):
                await outcome
            return


def evolve_skill(rows: Sequence[Mapping[str, Any]] | Sequence[Task], *, model: str | Provider | None = None,
                 prompt: str = "question", gold: str = "answer", score: str | Scorer = "exact", skill: str = "",
                 budget: Budget | None = None, seed: int = 0, params: Mapping[str, Any] | None = None,
                 **options: Any) -> Result:
    """Evolve a skill for `model` on `rows`: each row's `prompt` field is the question, `gold` the answer.

    Scores with `score` ("exact", "normalized_exact", "contains", "numeric", "f1" or a function), splits the
    rows into train / validation / test, and passes `options` (workers, asynchronous, store, callbacks, ...)
    to `evolve()`. `params` go to every solving call (default: temperature 0, max_tokens 64).
    """
    given = list(rows)
    tasks = [r for r in given if isinstance(r, Task)]
    if len(tasks) != len(given):
        tasks = tasks_from_rows(cast(list[Mapping[str, Any]], given), prompt=prompt, gold=gold)
    provider = resolve_model(model or default_model())
    small = isinstance(model or default_model(), str) and str(model or default_model()).startswith("local")
    agent = LLMAgent(provider, params=dict(params or {"temperature": 0.0, "max_tokens": 64}),
                     reflect_params={"temperature": 0.7, "max_tokens": 60 if small else 300}, structured=not small)
    try:
        return evolve(split(tasks, seed=seed), scoring(score), agent=agent, strategy=AppendRules(),
                      artifact=Artifact("skill", Kind.SKILL, skill), budget=budget or Budget(rollouts=60),
                      seed=seed, **options)
    finally:
        anyio.run(_close, provider)
