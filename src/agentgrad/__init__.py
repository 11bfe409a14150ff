"""agentgrad: make LLM agents better the way a training stack makes a network better.

Parameters are text artifacts, gradients are diffs that carry their evidence, and the optimizer is an
aggregator that filters, resolves, fuses, tests and commits them to a versioned library.

The public API is what this package's `__all__` lists, and the `__all__` of these subpackages:

- `agentgrad` (here): `evolve`, `evolve_skill` and `LLMAgent`; the tasks (`Task`, `Splits`, `split`, `load_set`);
  a library of artifacts evolved together (`Library`) and pipeline mode (`Pipeline`, `PipelineStage`, `Blame`);
  the run's settings and its result (`Budget`, `RunConfig`, `Workers`, `Acceptance`, `Staleness`, `StalePolicy`,
  `GateConfig`, `Result`); the typed shapes of your functions (`Agent`, `RunFn`, `ProposeFn`, `RewardFn`,
  `RepairFn`); the core values (`Artifact`, `Diff`, `Op`, `Evidence`, `Decision`, ...); and the errors
  (`AgentgradError` and its subclasses).
- `agentgrad.optim`: the stages, `chain`, the `default` recipe, the schedules, the `Aggregator`.
- `agentgrad.runtime`: the values `evolve` takes and returns, and `replay`.
- `agentgrad.store`: the run directory's store, event log, git mirror and promotion policy.
- `agentgrad.algorithms`: the published methods as recipes, one module each; `agentgrad.sandbox`: a sandbox
  for evolved code.
- `agentgrad.data`, `agentgrad.strategies`, `agentgrad.providers`, `agentgrad.tracking`, `agentgrad.testing`.

Every other module path (`agentgrad.core.diff`, `agentgrad.runtime.engine`, `agentgrad.optim.judge`, ...) is
internal: importable, but free to change; import from the packages above. The entry points that need numpy,
scipy, anyio or dulwich are imported when first used (PEP 562), so `import agentgrad` loads none of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentgrad._lazy import lazy_names
from agentgrad.core.artifact import Artifact, Kind, Layer, Version
from agentgrad.core.decision import Decision, Outcome
from agentgrad.core.diff import Diff, apply, compose, fingerprint, invert
from agentgrad.core.evidence import Evidence, Row
from agentgrad.core.library import Library
from agentgrad.core.ops import Action, Op
from agentgrad.core.rebase import Conflict, rebase
from agentgrad.core.units import Scope
from agentgrad.errors import (
    AgentgradError,
    ApplyConflictError,
    BudgetExhaustedError,
    BudgetOvershotError,
    ConfigError,
    DamagedStoreError,
    DataTooSmallError,
    FrozenLayerError,
    InvalidEvidenceError,
    InvalidIdError,
    InvalidOpError,
    InvalidProposalError,
    RewardError,
    RunFailedError,
    StaleHeadError,
    StateDictError,
    SystemicError,
    UnknownArtifactError,
    UnknownVersionError,
)
from agentgrad.protocols import Agent, ProposeFn, RepairFn, RewardFn, RunFn

if TYPE_CHECKING:
    from agentgrad.agents.llm import LLMAgent
    from agentgrad.agents.pipeline import Blame, Pipeline, PipelineStage
    from agentgrad.agents.skill import evolve_skill
    from agentgrad.data.shipped import load_set
    from agentgrad.data.splits import Splits, split
    from agentgrad.data.task import Task
    from agentgrad.runtime.budget import DEFAULT_BUDGET, Budget
    from agentgrad.runtime.config import Acceptance, RunConfig, Staleness, StalePolicy, Workers
    from agentgrad.runtime.evolve import evolve
    from agentgrad.runtime.gateconfig import GateConfig
    from agentgrad.runtime.isolated import in_subprocess
    from agentgrad.runtime.result import Result

# The entry points, imported when first used: `import agentgrad` stays light (no numpy, scipy, anyio or dulwich).
_ENTRY_POINTS = {
    "evolve": "agentgrad.runtime.evolve", "evolve_skill": "agentgrad.agents.skill", "LLMAgent": "agentgrad.agents.llm",
    "Task": "agentgrad.data.task", "Splits": "agentgrad.data.splits", "split": "agentgrad.data.splits",
    "load_set": "agentgrad.data.shipped", "Budget": "agentgrad.runtime.budget", "RunConfig": "agentgrad.runtime.config",
    "DEFAULT_BUDGET": "agentgrad.runtime.budget", "Workers": "agentgrad.runtime.config",
    "Acceptance": "agentgrad.runtime.config",
    "Staleness": "agentgrad.runtime.config", "StalePolicy": "agentgrad.runtime.config",
    "GateConfig": "agentgrad.runtime.gate", "Result": "agentgrad.runtime.result",
    "Pipeline": "agentgrad.agents.pipeline", "PipelineStage": "agentgrad.agents.pipeline",
    "Blame": "agentgrad.agents.pipeline", "in_subprocess": "agentgrad.runtime.isolated",
}


__getattr__ = lazy_names(__name__, _ENTRY_POINTS)


__all__ = [
    "DEFAULT_BUDGET", "Acceptance", "Action", "Agent", "AgentgradError", "ApplyConflictError", "Artifact", "Blame",
    "Budget",
    "BudgetExhaustedError", "BudgetOvershotError", "ConfigError", "Conflict", "DamagedStoreError",
    "DataTooSmallError", "Decision", "Diff", "Evidence", "FrozenLayerError", "GateConfig", "InvalidEvidenceError",
    "InvalidIdError", "InvalidOpError", "InvalidProposalError", "Kind", "LLMAgent", "Layer", "Library", "Op", "Outcome",
    "Pipeline", "PipelineStage",
    "ProposeFn", "RepairFn", "Result", "RewardError", "RewardFn", "Row", "RunConfig", "RunFailedError", "RunFn",
    "Scope", "Splits", "StaleHeadError", "StalePolicy", "Staleness", "StateDictError", "SystemicError", "Task",
    "UnknownArtifactError", "UnknownVersionError", "Version", "Workers", "apply", "compose", "evolve", "evolve_skill",
    "fingerprint", "in_subprocess", "invert", "load_set", "rebase", "split",
]
__version__ = "0.1.0"
