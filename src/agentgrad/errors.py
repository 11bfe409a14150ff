"""Typed errors. Every systemic fault raises one of these with what went wrong and where.

Per-example failures are never raised: they are evidence. These are for bad input and broken invariants.
"""

from __future__ import annotations


class AgentgradError(Exception):
    """Base class of every error agentgrad raises on purpose."""


class SystemicError(AgentgradError):
    """A fault that no example can get past (a rejected key, a model that does not exist): raised from inside the
    user's `run` or `propose` it is not evidence about that example; it stops the whole run at once."""


class InvalidIdError(AgentgradError, ValueError):
    """An artifact or diff id that is empty, too long, has NUL bytes or tries to escape a directory."""


class InvalidOpError(AgentgradError, ValueError):
    """A diff op that is malformed: unknown action or scope, missing text, wrong types."""


class InvalidEvidenceError(AgentgradError, ValueError):
    """Evidence with NaN or out-of-range scores, mismatched task sets, or task ids nobody knows."""


class UnknownArtifactError(AgentgradError, KeyError):
    """A diff or query names an artifact the store or the optimizer has never seen."""

    def __str__(self) -> str:  # KeyError quotes its message; we want it plain.
        return str(self.args[0]) if self.args else "unknown artifact"


class UnknownVersionError(AgentgradError, KeyError):
    """A diff or query names a version of an artifact that does not exist."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown version"


class ApplyConflictError(AgentgradError):
    """A diff does not apply to a text: the unit it edits is missing, already there, or holds other text."""


class FrozenLayerError(AgentgradError, PermissionError):
    """A write to an L0 (frozen) artifact: safety, permissions, oracle and audit budget never change."""


class DamagedStoreError(AgentgradError):
    """The store's database is damaged or is not a store at all (says which file and what the driver found); no
    write was made. Restore the run directory from a copy, or start a new run."""


class RunDirLockedError(AgentgradError):
    """Another run is writing to this run directory (the message names it): one writer per directory."""


class ForeignMirrorError(AgentgradError):
    """The run directory's git mirror holds a history its store did not write (another run's): it is not touched."""


class StaleHeadError(AgentgradError):
    """Compare-and-swap on a branch head failed: somebody else committed first. Rebase and try again."""


class StateDictError(AgentgradError, ValueError):
    """`load_state_dict` got a dict that does not match the object's shape; nothing was changed."""


class InvalidProposalError(AgentgradError, ValueError):
    """A proposal a strategy cannot turn into diff ops: empty, malformed, not text, or far too large."""


class ConfigError(AgentgradError, ValueError):
    """A stage, schedule or run was configured with values it cannot work with (says which and why)."""


class RewardError(AgentgradError):
    """The reward function raised, or returned something that is not a number in [0, 1].

    A grader bug is systemic, not a transient fault: the run stops at once and names the task.
    """


class RunFailedError(AgentgradError):
    """Every call to the user's `run` failed: the run stops instead of reporting a silent zero-reward success."""


class BudgetOvershotError(AgentgradError):
    """A call spent more tokens or cost than the per-call bound reserved for it, past the budget's limit."""


class BudgetExhaustedError(AgentgradError):
    """A budget ran out before the run could do anything useful (e.g. not one proposal was evaluated)."""


class DataTooSmallError(ConfigError):
    """The tasks are too few for the acceptance rule ever to commit a change at its settings (says how many tasks
    would do, and what to change)."""
