"""The README's first example, examples/quickstart.py: 12 tasks, a reward of 1 when the answer states the year.

With 3 validation tasks the run draws gate evidence from the training tasks too, says so in its protocol, and
reaches a held-out reward of 1.0, synchronous and asynchronous (on a fake clock, so nothing here is a timing).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from agentgrad.runtime.budget import DEFAULT_BUDGET, Budget
from agentgrad.runtime.evolve import evolve
from agentgrad.testing.clock import FakeClock


def quickstart() -> ModuleType:
    path = Path(__file__).parents[1] / "examples" / "quickstart.py"
    spec = importlib.util.spec_from_file_location("quickstart", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("asynchronous", [False, True])
def test_the_quickstart_reaches_a_held_out_reward_of_one(tmp_path: Path, asynchronous: bool) -> None:
    qs = quickstart()
    result = evolve(qs.TASKS, qs.reward, run=qs.run, propose=qs.propose, budget=Budget(calls=60), workers=4,
                    asynchronous=asynchronous, store=tmp_path / "run", clock=FakeClock().now)
    assert result.ok, result.error
    assert (result.baseline_test_reward, result.test_reward) == (0.0, 1.0)
    assert "year" in result.rendered.lower()
    assert "validation and training tasks together" in result.protocol
    assert result.usage.rollouts + result.usage.gate_evals <= 60


def test_the_quickstart_main_runs_as_documented(tmp_path: Path) -> None:
    result = quickstart().main(asynchronous=False, store=str(tmp_path / "run"))
    assert result.ok and result.test_reward == 1.0


def test_without_a_budget_the_quickstart_spends_the_documented_default_and_says_so(tmp_path: Path) -> None:
    qs = quickstart()
    result = evolve(qs.TASKS, qs.reward, run=qs.run, propose=qs.propose, store=tmp_path / "run",
                    clock=FakeClock().now)
    assert result.ok and result.test_reward == 1.0
    assert result.budget == DEFAULT_BUDGET == Budget(calls=300)
    assert result.usage.rollouts + result.usage.gate_evals <= 300
    assert "budget: calls=300 (the default" in result.summary()
