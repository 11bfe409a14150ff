"""Published self-evolution methods as recipes on the engine: the proposer, the strategy and the selection differ;
the runtime, the store, the budgets and the acceptance are the same.

Each method is a module with a one-line entry point of its own name, ``from agentgrad.algorithms.gepa import
gepa`` then ``gepa(tasks, reward, run=..., reflector=...)`` (or ``entry_point("gepa")``), a `Recipe` builder
(``recipe(...)``), and a fidelity note in ``docs/concepts/algorithms/``. A configuration file names one with
``[recipe] name = "gepa"``. The methods: ace, adas, dgm, evoskill, gepa, meta_harness, opro, reflexion, skillneo,
skillopt (`NAMES`).
"""

from agentgrad.algorithms.base import Recipe, RecipeAgent, Reply, fenced, resolve
from agentgrad.algorithms.catalog import NAMES, entry_point
from agentgrad.algorithms.traces import Trace, TraceLog

__all__ = ["NAMES", "Recipe", "RecipeAgent", "Reply", "Trace", "TraceLog", "entry_point", "fenced", "resolve"]
