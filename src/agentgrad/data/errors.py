"""Errors of the data layer: bad or missing data, a missing optional package, a judge that answers garbage.

They live here until they move to `agentgrad.errors`; every one is an `AgentgradError`.
"""

from __future__ import annotations

from agentgrad.errors import AgentgradError


class DataError(AgentgradError, ValueError):
    """Data that cannot be used: an empty file, a bad JSON line, a row without a field, duplicate task ids."""


class DataUnavailableError(DataError, LookupError):
    """Data that is not there: a missing file, an unknown shipped set, a Hugging Face set not available offline."""


class MissingDependencyError(AgentgradError, ImportError):
    """An optional loader needs a package that is not installed; the message names the extra to install."""


class JudgeError(AgentgradError, ValueError):
    """An LLM judge answered something that is not a score in range (the reply is quoted in the message)."""
