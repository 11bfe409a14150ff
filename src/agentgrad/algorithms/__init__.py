"""Published self-evolution methods as recipes on the engine (GEPA, ACE, OPRO, Reflexion, EvoSkill, SkillOpt,
SkillNEO, ADAS, DGM, Meta-Harness): the proposer, the strategy and the selection differ; the runtime, the store,
the budgets and the acceptance are the same. Each method has a one-line entry point (``algorithms.gepa(...)``)
and a `Recipe` builder; `docs/concepts/algorithms.md` says how faithful each port is.
"""

from agentgrad.algorithms.base import Recipe, RecipeAgent, Reply, fenced, resolve
from agentgrad.algorithms.traces import Trace, TraceLog

__all__ = ["Recipe", "RecipeAgent", "Reply", "Trace", "TraceLog", "fenced", "resolve"]
