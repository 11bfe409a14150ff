"""The front door: the entry points import from `agentgrad` itself, and `import agentgrad` stays light."""

from __future__ import annotations

import subprocess
import sys

import pytest

import agentgrad
from agentgrad.agents.skill import evolve_skill
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.evolve import evolve


def test_the_entry_points_are_importable_from_the_top_level() -> None:
    from agentgrad import Budget as TopBudget
    from agentgrad import evolve as top_evolve
    from agentgrad import evolve_skill as top_evolve_skill
    assert (top_evolve, top_evolve_skill, TopBudget) == (evolve, evolve_skill, Budget)
    for name in agentgrad.__all__:
        assert getattr(agentgrad, name) is not None


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        agentgrad.nothing_here  # noqa: B018


def test_importing_agentgrad_loads_no_heavy_dependency() -> None:
    code = "import sys, agentgrad; print([m for m in ('numpy', 'scipy', 'anyio', 'dulwich') if m in sys.modules])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"
