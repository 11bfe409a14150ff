"""`SandboxedFunction`: call `run(task_input: str) -> str` of an evolved Python module inside a sandbox, the way
recipes such as DGM and ADAS evaluate evolved code. The answer travels back as JSON on stdout."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from agentgrad.sandbox.errors import SandboxConfigError
from agentgrad.sandbox.result import SandboxResult
from agentgrad.sandbox.runner import Sandbox

_HARNESS = Path(__file__).with_name("_harness.py")
MODULE_FILE = "evolved.py"


@dataclass(frozen=True)
class FunctionCall:
    """One call of a sandboxed function: its output, or why there is none, and the run it took.

    Args:
        output: what the function returned, or None when the call failed.
        error: why it failed (how the run ended and the last line of stderr, or what was wrong with stdout), or
            None.
        result: the sandbox run.
    """

    output: str | None
    error: str | None
    result: SandboxResult

    @property
    def ok(self) -> bool:
        return self.error is None


class SandboxedFunction:
    """A function defined by evolved source, called in a fresh sandbox run on each input.

    Args:
        source: a Python module defining `entry(task_input: str) -> str`.
        sandbox: the sandbox to call it in (default: `Sandbox()` with default limits and no network).
        entry: the name of the function.
        files: more files for the working directory (helper modules the source imports).
    """

    def __init__(self, source: str, sandbox: Sandbox | None = None, *, entry: str = "run",
                 files: Mapping[str, str] | None = None) -> None:
        if not isinstance(source, str):
            raise SandboxConfigError(f"source must be Python source text, not {type(source).__name__}")
        if not isinstance(entry, str) or not entry.isidentifier():
            raise SandboxConfigError(f"entry must be a Python name, not {entry!r}")
        if files is not None and MODULE_FILE in files:
            raise SandboxConfigError(f"files may not hold {MODULE_FILE}: the source goes there")
        self.sandbox = sandbox or Sandbox()
        self.entry = entry
        self._files = {**(files or {}), MODULE_FILE: source}
        self._harness = _HARNESS.read_text(encoding="utf-8")

    def __call__(self, task_input: str) -> FunctionCall:
        """Call the function on `task_input`; every failure is in the returned `FunctionCall`."""
        result = self.sandbox.run_python(self._harness, stdin=task_input, files=self._files, args=[self.entry])
        return read_call(result)

    async def acall(self, task_input: str) -> FunctionCall:
        """`__call__` without blocking the event loop."""
        result = await self.sandbox.arun_python(self._harness, stdin=task_input, files=self._files,
                                                args=[self.entry])
        return read_call(result)


def read_call(result: SandboxResult) -> FunctionCall:
    """The call a run of the harness made."""
    if not result.ok:
        lines = result.stderr.strip().splitlines()
        return FunctionCall(None, f"{result.describe()}: {lines[-1]}" if lines else result.describe(), result)
    try:
        answer = json.loads(result.stdout)
    except json.JSONDecodeError as error:
        return FunctionCall(None, f"stdout is not the harness's JSON answer ({error}); did the code write to "
                                  "descriptor 1 itself?", result)
    if not isinstance(answer, dict) or not isinstance(answer.get("output"), str):
        return FunctionCall(None, "stdout is not the harness's JSON answer", result)
    return FunctionCall(answer["output"], None, result)
