"""Errors of a sandbox that cannot work. What the code does inside a working sandbox is never raised: it is data
(`SandboxResult`)."""

from __future__ import annotations

from agentgrad.errors import ConfigError, SystemicError


class SandboxError(SystemicError):
    """The sandbox cannot run code at all (it could not set itself up, or could not stop its processes): no example
    can get past it, so a run stops."""


class SandboxConfigError(SandboxError, ConfigError):
    """A sandbox or a run of it was configured with values it cannot work with: limits, file names, environment
    variables (says which and why)."""


class IsolationUnavailableError(SandboxError):
    """This machine cannot make the namespaces the sandbox needs (says what is missing), so it refuses to run code
    rather than run it unisolated."""


class NetworkIsolationError(IsolationUnavailableError):
    """No network namespace can be made here, and the code is network-sensitive (`Sandbox(network=False)`): it is
    refused rather than run with the host's network."""
