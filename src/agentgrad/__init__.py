"""agentgrad: make LLM agents better the way a training stack makes a network better.

Parameters are text artifacts, gradients are diffs that carry their evidence, and the optimizer is an
aggregator that filters, resolves, fuses, tests and commits them to a versioned library.
"""

from agentgrad.core.artifact import Artifact, Kind, Layer, Version
from agentgrad.core.decision import Decision, Outcome
from agentgrad.core.diff import Diff, apply, compose, fingerprint, invert
from agentgrad.core.evidence import Evidence, Row
from agentgrad.core.ops import Action, Op
from agentgrad.core.rebase import Conflict, rebase
from agentgrad.core.units import Scope

__all__ = [
    "Action", "Artifact", "Conflict", "Decision", "Diff", "Evidence", "Kind", "Layer", "Op", "Outcome", "Row",
    "Scope", "Version", "apply", "compose", "fingerprint", "invert", "rebase",
]
__version__ = "0.1.0"
