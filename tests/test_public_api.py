"""The front door: what a user imports comes from `agentgrad` or a curated subpackage, and `import agentgrad` stays
light.

The public API is the `__all__` of the top level and of the subpackages in `CURATED`. Every name there resolves
(to a value, never to a submodule that shadows it), no two different classes go by one public name, and the
protocols of the user's functions fit the functions `evolve` really calls.
"""

from __future__ import annotations

import asyncio
import doctest
import importlib
import subprocess
import sys
import types
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import agentgrad
from agentgrad import (
    Agent,
    Budget,
    LLMAgent,
    ProposeFn,
    RepairFn,
    RewardFn,
    RunFn,
    Task,
    evolve,
)
from agentgrad.agents.skill import evolve_skill, scoring
from agentgrad.providers import CallableProvider
from agentgrad.runtime.budget import Budget as DeepBudget
from agentgrad.runtime.evolve import evolve as deep_evolve
from agentgrad.testing import FakeClock

CURATED = ("agentgrad", "agentgrad.optim", "agentgrad.runtime", "agentgrad.store", "agentgrad.data",
           "agentgrad.strategies", "agentgrad.providers", "agentgrad.tracking", "agentgrad.testing")
HEAVY = ("numpy", "scipy", "anyio", "dulwich")


def public() -> list[tuple[str, str, Any]]:
    """(package, name, value) for every name of every curated `__all__`."""
    found = []
    for package in CURATED:
        module = importlib.import_module(package)
        found += [(package, name, getattr(module, name)) for name in module.__all__]
    return found


def test_the_entry_points_are_importable_from_the_top_level() -> None:
    assert (evolve, evolve_skill, Budget) == (deep_evolve, agentgrad.evolve_skill, DeepBudget)
    for name in agentgrad.__all__:
        assert getattr(agentgrad, name) is not None
    assert set(agentgrad._ENTRY_POINTS) <= set(agentgrad.__all__)


@pytest.mark.parametrize("package", CURATED)
def test_every_name_of_a_curated_all_resolves(package: str) -> None:
    module = importlib.import_module(package)
    names: Sequence[str] = module.__all__
    assert len(set(names)) == len(names), f"{package}.__all__ lists a name twice"
    for name in names:
        value = getattr(module, name)
        assert value is not None, f"{package}.{name}"
        # a submodule of the same name (agentgrad.optim.chain, agentgrad.runtime.evolve) must not shadow it
        assert not isinstance(value, types.ModuleType), f"{package}.{name} is a module, not the value"


@pytest.mark.parametrize("package", CURATED)
def test_the_examples_in_a_curated_package_docstring_run(package: str) -> None:
    assert doctest.testmod(importlib.import_module(package)).failed == 0


def test_a_submodule_imported_first_does_not_shadow_a_public_name() -> None:
    import agentgrad.optim.chain
    import agentgrad.optim.tabu
    import agentgrad.runtime.evolve  # imported first on purpose: it must not shadow agentgrad.evolve
    from agentgrad.optim import chain, tabu

    assert callable(chain) and callable(tabu) and callable(agentgrad.evolve)
    assert not isinstance(agentgrad.evolve, types.ModuleType)


def test_no_two_public_classes_share_a_name() -> None:
    by_name: dict[str, tuple[str, object]] = {}
    for package, name, value in public():
        keys = {name, value.__name__} if isinstance(value, type) else {name}
        for key in keys:
            where, seen = by_name.setdefault(key, (f"{package}.{name}", value))
            assert seen is value, f"{key!r} names two different values: {where} and {package}.{name}"


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        agentgrad.nothing_here  # noqa: B018
    for package in ("agentgrad.runtime", "agentgrad.store"):
        with pytest.raises(AttributeError, match=f"module '{package}' has no attribute 'nothing_here'"):
            getattr(importlib.import_module(package), "nothing_here")  # noqa: B009


@pytest.mark.parametrize("statement", [
    "import agentgrad",
    "from agentgrad import Agent, AgentgradError, Artifact, Budget, Result, RewardFn",
    "from agentgrad.runtime import Budget, Result, RunUsage",
    "from agentgrad.store import Event, EventLog, Promotion, Store",
])
def test_importing_the_light_names_loads_no_heavy_dependency(statement: str) -> None:
    code = f"import sys\n{statement}\nprint([m for m in {HEAVY!r} if m in sys.modules])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"


# -- the protocols: mypy checks the assignments below; the tests check that evolve calls them that way ---------

def run_plain(skill: str, task: Task) -> str:
    return task.input.upper() if "capitals" in skill else task.input


@dataclass(frozen=True)
class Reply:
    """An output with a `.text`, as a provider's `Completion` is."""

    text: str


async def run_async(skill: str, task: Task) -> Reply:
    return Reply(run_plain(skill, task))


def propose(skill: str, task: Task, output: str | None, reward: float) -> str:
    return "Answer in capitals."


async def reward(task: Task, output: str) -> float:
    return 1.0 if output == task.expected else 0.0


def repair(diff: dict[str, Any], head_text: str) -> list[dict[str, str]]:
    return [{"action": "add", "content": "Answer in capitals."}]


class Shouter:
    """An `Agent` with async methods."""

    async def run(self, rendered: str, task: Task) -> str:
        return run_plain(rendered, task)

    def propose(self, rendered: str, task: Task, output: str | None, reward: float) -> dict[str, str]:
        return {"action": "add", "content": "Answer in capitals."}


RUNS: tuple[RunFn, ...] = (run_plain, run_async)
PROPOSE: ProposeFn = propose
REWARDS: tuple[RewardFn, ...] = (reward, scoring("exact"))
REPAIR: RepairFn = repair  # the shape Staleness(policy="repair", repair=...) calls
TASKS = [Task(f"w{i:02d}", f"word {i}", expected=f"WORD {i}") for i in range(12)]


def as_agent(agent: LLMAgent) -> Agent:
    """`LLMAgent` is an `Agent` (mypy checks this return)."""
    return agent


def as_repair(agent: LLMAgent) -> RepairFn:
    """`LLMAgent.repair` is a `RepairFn` (mypy checks this return)."""
    return agent.repair


@pytest.mark.parametrize("run", RUNS, ids=["plain", "async"])
def test_functions_of_the_protocols_shapes_evolve_a_skill(tmp_path: Path, run: RunFn) -> None:
    result = evolve(TASKS, REWARDS[0], run=run, propose=PROPOSE, budget=Budget(calls=60), workers=2,
                    asynchronous=False, store=tmp_path / "run", clock=FakeClock().now)
    assert result.ok, result.error
    assert result.test_reward == 1.0
    assert "capitals" in result.rendered


def test_an_agent_evolves_a_skill(tmp_path: Path) -> None:
    agent: Agent = Shouter()
    assert isinstance(agent, Agent) and not isinstance(object(), Agent)
    result = evolve(TASKS, REWARDS[1], agent=agent, budget=Budget(calls=60), workers=2, asynchronous=False,
                    store=tmp_path / "run", clock=FakeClock().now)
    assert result.ok, result.error
    assert result.test_reward == 1.0


def test_an_llm_agent_is_an_agent() -> None:
    llm = LLMAgent(CallableProvider(lambda messages, **params: "WORD 1"))
    assert isinstance(as_agent(llm), Agent) and callable(as_repair(llm))
    assert asyncio.run(llm.run("", TASKS[1])).text == "WORD 1"
