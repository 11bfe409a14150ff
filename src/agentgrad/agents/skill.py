"""`evolve_skill()`: evolve the skill (system prompt) a model follows on a dataset of rows, in one call."""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import anyio

from agentgrad.agents.demo_agent import DEMO_PROPOSERS, DemoAgent
from agentgrad.agents.edits import RULE_SCHEMA
from agentgrad.agents.llm import LLMAgent
from agentgrad.core.artifact import Artifact, Kind
from agentgrad.data.scorers import Scorer, get_scorer
from agentgrad.data.splits import split
from agentgrad.data.task import Task, tasks_from_rows
from agentgrad.errors import ConfigError, RewardError
from agentgrad.providers.base import Provider
from agentgrad.providers.errors import ConnectionLost, ProviderTimeout
from agentgrad.providers.middleware import Accounting, CircuitBreaker, ConcurrencyLimit, FatalLatch, Meter, Retry, wrap
from agentgrad.providers.middleware.latch import FIRST_ANSWER_WITHIN
from agentgrad.runtime.budget import DEFAULT_BUDGET, Budget
from agentgrad.runtime.config import Workers
from agentgrad.runtime.evolve import evolve
from agentgrad.runtime.result import Result
from agentgrad.strategies.base import Strategy
from agentgrad.strategies.demos import Demonstrations
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
    concurrency limit, one retry budget per call, a circuit breaker (after 5 requests in a row time out or lose
    their connection, calls fail at once for 30 s, then one probes; rate limits never open it), and a latch that
    sends one call first and stops every later one at once after an answer no retry can change (a bad key, an
    unknown model) or no answer at all within 30 s (a silent endpoint: `SilentEndpointError`; the run stops).
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
    # an in-process model is no endpoint that could be silent, and its first call may include loading it
    silent_after = None if kind == "local" else FIRST_ANSWER_WITHIN
    return wrap(provider, lambda p: Accounting(p, meter), lambda p: ConcurrencyLimit(p, concurrency),
                lambda p: CircuitBreaker(p, opens_on=(ProviderTimeout, ConnectionLost)), Retry,
                lambda p: FatalLatch(p, first_answer_within=silent_after))


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


def _concurrency(options: Mapping[str, Any]) -> int:
    """How many model calls a run may have in flight: its run slots plus its proposers (at most 16)."""
    given = options.get("workers")
    config = options.get("config")
    workers = Workers.of(given) if given is not None else config.workers if config is not None else Workers()
    return max(1, min(16, workers.run_slots + workers.propose))


def _is_local(model: str | Provider) -> bool:
    from agentgrad.providers.local import LocalModel  # no xllamacpp import: that happens in local()
    return str(model).startswith("local") if isinstance(model, str) else isinstance(model, LocalModel)


def make_agent(provider: Provider, *, local: bool, proposer: str | None = None, seed: int = 0,
               params: Mapping[str, Any] | None = None) -> LLMAgent:
    """The `LLMAgent` `evolve_skill` uses: solving at temperature 0, proposals sampled at temperature 0.7.

    `proposer` is the style ("rule" or "edits"; default "rule" for a local model, "edits" for a hosted one). Local
    models get the one-rule scaffold with the reply held to `RULE_SCHEMA` by llama.cpp's grammar, 64 tokens at most,
    and proposal call i seeded with ``seed + i``.
    """
    style = proposer or ("rule" if local else "edits")
    reflect: dict[str, Any] = {"temperature": 0.7, "max_tokens": 64 if style == "rule" else 300}
    if local and style == "rule":
        reflect["json_schema"] = RULE_SCHEMA
    return LLMAgent(provider, params=dict(params or {"temperature": 0.0, "max_tokens": 64}), reflect_params=reflect,
                    style=style, seed=seed if local else None)


PROPOSERS = ("rule", "edits", *DEMO_PROPOSERS)


def _solver(agent: LLMAgent, proposer: str | None, *, nearest: int | None = None,
            closed: bool = False) -> tuple[LLMAgent | DemoAgent, Strategy]:
    """The agent and the strategy of a run: `agent` with `AppendRules`, or for the demonstration proposers a
    `DemoAgent` around it (showing `nearest` examples, answers `closed`) with the `Demonstrations` strategy."""
    if proposer in DEMO_PROPOSERS:
        return DemoAgent(agent, rules=proposer == "demos+rules", nearest=nearest, closed=closed), Demonstrations()
    if nearest is not None or closed:
        raise ConfigError("nearest= and closed= shape how a skill's examples are shown: use them with "
                          f"proposer='demos' or 'demos+rules', not {proposer!r}")
    return agent, AppendRules()


def evolve_skill(rows: Sequence[Mapping[str, Any]] | Sequence[Task], *, model: str | Provider | None = None,
                 prompt: str = "question", gold: str = "answer", score: str | Scorer = "exact", skill: str = "",
                 budget: Budget | None = None, seed: int = 0, params: Mapping[str, Any] | None = None,
                 proposer: str | None = None, nearest: int | None = None, closed: bool = False,
                 **options: Any) -> Result:
    """Evolve a skill for `model` on `rows`: each row's `prompt` field is the question, `gold` the answer.

    Scores with `score` ("exact", "normalized_exact", "contains", "numeric", "f1" or a function), splits the
    rows into train / validation / test, and passes `options` (workers, asynchronous, store, callbacks, ...)
    to `evolve()`. `params` go to every solving call (default: temperature 0, max_tokens 64). `proposer` picks
    how proposals are asked for: "rule" or "edits" (see `make_agent`), "demos" (worked examples: a failed
    training input with its gold answer, no model call; the `Demonstrations` strategy; see `DemoAgent`), or
    "demos+rules" (demonstrations and the model's rules, alternately, in one skill); with those, `nearest` shows
    the model only that many examples, the most like each input, and `closed` restricts its answers to those the
    examples show (llama.cpp models: see `DemoAgent`). A model named by a string is
    started (local) or connected with as many parallel calls as the run's workers make at once, and closed at the
    end.
    """
    given = list(rows)
    tasks = [r for r in given if isinstance(r, Task)]
    if len(tasks) != len(given):
        tasks = tasks_from_rows(cast(list[Mapping[str, Any]], given), prompt=prompt, gold=gold)
    if proposer is not None and proposer not in PROPOSERS:
        raise ConfigError(f"unknown proposer {proposer!r}: use one of {PROPOSERS} (or None for the default)")
    chosen = model or default_model()
    provider = resolve_model(chosen, concurrency=_concurrency(options))
    style = "rule" if proposer in DEMO_PROPOSERS else proposer  # a demonstrations run asks the model for rules only
    agent = make_agent(provider, local=_is_local(chosen), proposer=style, seed=seed, params=params)
    splits = split(tasks, seed=seed)
    agent.remember(task.expected for task in splits.train[:agent.shown])
    solver, strategy = _solver(agent, proposer, nearest=nearest, closed=closed)
    try:
        return evolve(splits, scoring(score), agent=solver, strategy=strategy,
                      artifact=Artifact("skill", Kind.SKILL, skill), budget=budget or DEFAULT_BUDGET,
                      seed=seed, **options)
    finally:
        if isinstance(chosen, str):
            anyio.run(_close, provider)
