"""A sandbox for running code nobody reviewed: evolved harnesses and programs (ADAS, DGM, Meta-Harness).

`Sandbox.run` / `run_python` execute code in new Linux namespaces with no network, a read-only view of the host's
files but for a fresh working directory, a clean environment, its own unprivileged user and resource limits, and
return a `SandboxResult`; `SandboxedFunction` calls `run(task_input) -> str` of an evolved module that way.
"""

from agentgrad.sandbox.errors import (
    IsolationUnavailableError,
    NetworkIsolationError,
    SandboxConfigError,
    SandboxError,
)
from agentgrad.sandbox.function import FunctionCall, SandboxedFunction
from agentgrad.sandbox.isolation import Isolation, probe_isolation
from agentgrad.sandbox.limits import Limits
from agentgrad.sandbox.result import LimitHit, SandboxResult
from agentgrad.sandbox.runner import Sandbox

__all__ = [
    "FunctionCall",
    "Isolation",
    "IsolationUnavailableError",
    "LimitHit",
    "Limits",
    "NetworkIsolationError",
    "Sandbox",
    "SandboxConfigError",
    "SandboxError",
    "SandboxResult",
    "SandboxedFunction",
    "probe_isolation",
]
