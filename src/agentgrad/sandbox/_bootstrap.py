"""Run a Python file as `__main__` inside the sandbox and note the limit that ended it (passed to `python -c`).

Usage: `python -I -B -c <this source> NOTE_FD FILE [ARG ...]`. An uncaught `MemoryError` is noted as "memory", an
uncaught EFBIG error as "file_size", and an uncaught failure to start a process or thread (EAGAIN) as
"processes", on descriptor NOTE_FD for the launcher; the error then propagates as usual (traceback, status 1).
Standard library only: it runs with the sandboxed interpreter, not with agentgrad.
"""

from __future__ import annotations

import errno
import os
import sys
import types


def limit_of(error: BaseException) -> str | None:
    """The limit an uncaught error shows the code ran into, or None."""
    if isinstance(error, MemoryError):
        return "memory"
    if isinstance(error, OSError) and error.errno == errno.EFBIG:
        return "file_size"
    if isinstance(error, BlockingIOError) and error.errno == errno.EAGAIN:
        return "processes"
    if isinstance(error, RuntimeError) and "can't start new thread" in str(error):
        return "processes"
    return None


def note(fd: int, limit: str) -> None:
    try:
        os.write(fd, limit.encode() + b"\n")
    except OSError as error:  # the code closed the descriptor: say so, the traceback still follows
        print(f"agentgrad sandbox: could not note the {limit} limit: {error}", file=sys.stderr)


def main() -> None:
    fd, path = int(sys.argv[1]), sys.argv[2]
    sys.argv = sys.argv[2:]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    module = types.ModuleType("__main__")
    module.__file__ = path
    sys.modules["__main__"] = module
    with open(path, encoding="utf-8") as file:
        code = compile(file.read(), path, "exec", dont_inherit=True)
    try:
        exec(code, module.__dict__)
    except BaseException as error:
        limit = limit_of(error)
        if limit is not None:
            note(fd, limit)
        raise


if __name__ == "__main__":
    main()
