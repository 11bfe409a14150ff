"""agentgrad: make LLM agents better the way a training stack makes a network better.

Parameters are text artifacts, gradients are diffs that carry their evidence, and the optimizer is an
aggregator that filters, resolves, fuses, tests and commits them to a versioned library.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from agentgrad.core.artifact import Artifact, Kind, Layer, Version
from agentgrad.core.decision import Decision, Outcome
from agentgrad.core.diff import Diff, apply, compose, fingerprint, invert
from agentgrad.core.evidence import Evidence, Row
from agentgrad.core.ops import Action, Op
from agentgrad.core.rebase import Conflict, rebase
from agentgrad.core.units import Scope

if TYPE_CHECKING:
    from agentgrad.agents.skill import evolve_skill
    from agentgrad.data.shipped import load_set
    from agentgrad.data.splits import Splits, split
    from agentgrad.data.task import Task
    from agentgrad.runtime.budget import Budget
    from agentgrad.runtime.config import Acceptance, RunConfig, Staleness, Workers
    from agentgrad.runtime.evolve import evolve
    from agentgrad.runtime.gate import GateConfig
    from agentgrad.runtime.result import Result

# The entry points, imported when first used: `import agentgrad` stays light (no numpy, scipy or anyio).
_ENTRY_POINTS = {
    "evolve": "agentgrad.runtime.evolve", "evolve_skill": "agentgrad.agents.skill", "Task": "agentgrad.data.task",
    "Budget": "agentgrad.runtime.budget", "RunConfig": "agentgrad.runtime.config",
    "Workers": "agentgrad.runtime.config", "Acceptance": "agentgrad.runtime.config",
    "Staleness": "agentgrad.runtime.config",
    "GateConfig": "agentgrad.runtime.gate", "Result": "agentgrad.runtime.result", "Splits": "agentgrad.data.splits",
    "split": "agentgrad.data.splits", "load_set": "agentgrad.data.shipped",
}


def __getattr__(name: str) -> Any:
    """The entry points of `_ENTRY_POINTS`, imported on first use (PEP 562)."""
    module = _ENTRY_POINTS.get(name)
    if module is None:
        raise AttributeError(f"module 'agentgrad' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "Acceptance", "Action", "Artifact", "Budget", "Conflict", "Decision", "Diff", "Evidence", "GateConfig", "Kind",
    "Layer", "Op", "Outcome", "Result", "Row", "RunConfig", "Scope", "Splits", "Staleness", "Task", "Version",
    "Workers", "apply", "compose", "evolve", "evolve_skill", "fingerprint", "invert", "load_set", "rebase", "split",
]
__version__ = "0.1.0"
