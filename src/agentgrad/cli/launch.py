"""Start (or resume) `evolve()` from a validated configuration: the reference world, a named model on rows, or the
user's own functions."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentgrad.cli.config import ConfigSource, TaskSection
from agentgrad.cli.imports import resolve_callable

if TYPE_CHECKING:
    from agentgrad.cli.schema import CliConfig
    from agentgrad.data.task import Task
    from agentgrad.runtime.budget import Budget
    from agentgrad.runtime.config import RunConfig
    from agentgrad.runtime.result import Result

Callback = Callable[[str, Mapping[str, Any]], None]


def budget_of(config: CliConfig) -> Budget:
    """The `Budget` of a configuration."""
    return config.budget


def run_config(config: CliConfig, repair: Callable[..., Any] | None) -> RunConfig:
    """The `RunConfig` of a configuration, with `repair` as the staleness repair function when the policy is
    "repair" (the file cannot hold a function: it names one in [model] repair, or the world brings one)."""
    from agentgrad.runtime.config import StalePolicy

    run = config.run.config
    chosen = repair if run.staleness.policy is StalePolicy.REPAIR else None
    return replace(run, staleness=replace(run.staleness, repair=chosen))


def _options(config: CliConfig, run_dir: Path, callbacks: Sequence[Callback],
             repair: Callable[..., Any] | None) -> dict[str, Any]:
    """The keyword arguments every kind of run passes on to `evolve()`: the whole `RunConfig` (its workers,
    staleness, seed and the rest), the budget, the run directory and the callbacks."""
    return {"budget": budget_of(config), "store": run_dir, "callbacks": list(callbacks),
            "config": run_config(config, repair)}


def _tasks(task: TaskSection) -> list[Task]:
    from agentgrad.data import load_csv, load_jsonl, load_parquet, load_set, tasks_from_rows

    if task.set_ is not None:
        return load_set(task.set_)
    assert task.path is not None
    loaders = {".jsonl": load_jsonl, ".csv": load_csv, ".parquet": load_parquet}
    rows = loaders[Path(task.path).suffix.lower()](task.path)
    return tasks_from_rows(rows, prompt=task.prompt, gold=task.gold, id=task.id)


def _score(task: TaskSection, folder: Path) -> str | Callable[..., Any]:
    from agentgrad.data.shipped import recommended_scorer

    if task.score is None:
        return recommended_scorer(task.set_) if task.set_ is not None else "exact"
    return task.score if ":" not in task.score else resolve_callable(task.score, folder)


def _world(config: CliConfig, run_dir: Path, callbacks: Sequence[Callback]) -> Result:
    from agentgrad.runtime.evolve import evolve
    from agentgrad.testing.agents import WorldAgent
    from agentgrad.testing.world import ReferenceWorld, WorldConfig

    section = config.task.world
    assert section is not None
    world = ReferenceWorld(WorldConfig(**section.world_fields()))
    agent = WorldAgent(world, median=section.median, sigma=section.sigma, fail_every=section.fail_every)
    return evolve(agent.splits(), agent.reward, agent=agent, strategy=world.strategy, artifact=world.artifact,
                  seed=config.run.config.seed, **_options(config, run_dir, callbacks, agent.repair))


def _own_functions(config: CliConfig, folder: Path, run_dir: Path, callbacks: Sequence[Callback]) -> Result:
    from agentgrad.agents.skill import scoring
    from agentgrad.core.artifact import Artifact, Kind
    from agentgrad.data.splits import split
    from agentgrad.runtime.evolve import evolve

    model = config.model
    assert model is not None and model.run is not None and model.propose is not None
    repair = resolve_callable(model.repair, folder) if model.repair is not None else None
    tasks = split(_tasks(config.task), seed=config.run.config.seed)
    return evolve(tasks, scoring(_score(config.task, folder)), run=resolve_callable(model.run, folder),
                  propose=resolve_callable(model.propose, folder), artifact=Artifact("skill", Kind.SKILL,
                                                                                     config.task.skill),
                  seed=config.run.config.seed, **_options(config, run_dir, callbacks, repair))


def _named_model(config: CliConfig, folder: Path, run_dir: Path, callbacks: Sequence[Callback]) -> Result:
    from agentgrad.agents.skill import evolve_skill

    model = config.model
    assert model is not None and model.name is not None
    options = _options(config, run_dir, callbacks, None)
    return evolve_skill(_tasks(config.task), model=model.name, score=_score(config.task, folder),
                        skill=config.task.skill, seed=config.run.config.seed, params=model.params, **options)


def _reflector(name: str | None, folder: Path) -> Any:
    """A recipe's reflector: a model name as it is, or what a "module:function" names (a provider, or a function
    of the messages that answers with text, wrapped as a provider)."""
    if name is None or name == "local" or name.partition(":")[0] in ("openai", "anthropic"):
        return name
    from agentgrad.providers.callable import CallableProvider

    found = resolve_callable(name, folder)
    return found if hasattr(found, "complete") else CallableProvider(found, name=name)


def _recipe(config: CliConfig, folder: Path, run_dir: Path, callbacks: Sequence[Callback]) -> Result:
    """A published method's run (`agentgrad.algorithms`): the recipe keeps its own run settings; [run] sets its
    workers, runtime and seed."""
    from agentgrad.agents.skill import scoring
    from agentgrad.algorithms.catalog import entry_point

    recipe, model, run = config.recipe, config.model, config.run.config
    assert recipe is not None and model is not None
    solver = resolve_callable(model.run, folder) if model.run is not None else None
    result: Result = entry_point(recipe.name)(
        _tasks(config.task), scoring(_score(config.task, folder)), run=solver, model=model.name,
        reflector=_reflector(recipe.reflector, folder), artifact=config.task.skill or None, budget=budget_of(config),
        asynchronous=run.asynchronous, workers=run.workers, store=run_dir, seed=run.seed, callbacks=list(callbacks),
        **recipe.options)
    return result


def launch(config: CliConfig, source: ConfigSource, run_dir: Path, callbacks: Sequence[Callback] = ()) -> Result:
    """Run (or, when `run_dir` holds one, resume) the configured run; returns evolve's `Result`.

    Args:
        config: the validated configuration.
        source: where it came from (its directory resolves relative paths and user modules).
        run_dir: the run directory.
        callbacks: evolve callbacks (progress views).
    """
    folder = Path(source.base_dir)
    if config.task.world is not None:
        return _world(config, run_dir, callbacks)
    if config.recipe is not None:
        return _recipe(config, folder, run_dir, callbacks)
    if config.model is not None and config.model.name is None:
        return _own_functions(config, folder, run_dir, callbacks)
    return _named_model(config, folder, run_dir, callbacks)
