"""The main program of `SandboxedFunction` in the sandbox: import `evolved.py`, call ENTRY on stdin, and write
`{"output": <what it returned>}` to stdout. Whatever the module prints goes to stderr, so stdout holds only that.

Usage (through the bootstrap): `main.py ENTRY`. Standard library only.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import sys

MODULE = "evolved"


def main() -> None:
    entry = sys.argv[1]
    task_input = sys.stdin.read()
    answer = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):
        spec = importlib.util.spec_from_file_location(MODULE, f"{MODULE}.py")
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {MODULE}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[MODULE] = module
        spec.loader.exec_module(module)
        output = getattr(module, entry)(task_input)
    if not isinstance(output, str):
        raise TypeError(f"{entry}() returned {type(output).__name__}, not str")
    answer.write(json.dumps({"output": output}))
    answer.flush()


if __name__ == "__main__":
    main()
