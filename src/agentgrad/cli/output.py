"""How commands end: exit codes, one-line error messages on stderr, and JSON output for scripts.

Exit codes: 0 done, 1 the run or the command failed (a failed run, no run in the directory, an unknown version),
2 bad input (an invalid configuration, bad options), 130 interrupted (Ctrl-C or `agentgrad cancel`).
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import Any, NoReturn, ParamSpec, TypeVar

import typer

from agentgrad.errors import AgentgradError, ConfigError

OK, FAILED, USAGE, INTERRUPTED = 0, 1, 2, 130
P = ParamSpec("P")
R = TypeVar("R")


def say(text: str) -> None:
    """A line on stdout."""
    typer.echo(text)


def warn(text: str) -> None:
    """A line on stderr."""
    typer.echo(text, err=True)


def fail(message: str, code: int = FAILED) -> NoReturn:
    """Print ``error: message`` on stderr and exit with `code`."""
    warn(f"error: {message}")
    raise typer.Exit(code)


def emit_json(value: Any) -> None:
    """One JSON document on stdout (one line)."""
    sys.stdout.write(json.dumps(value, default=str) + "\n")
    sys.stdout.flush()


def guarded(command: Callable[P, R]) -> Callable[P, R]:
    """Turn agentgrad errors (and a file error on a path the user named) raised by `command` into one message per
    problem and an exit code (no traceback)."""
    from agentgrad.cli.config import ConfigFileError

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except ConfigFileError as exc:
            for problem in exc.problems:
                warn(f"error: {exc.source}: {problem}")
            raise typer.Exit(USAGE) from None
        except ConfigError as exc:
            fail(str(exc), USAGE)
        except AgentgradError as exc:
            fail(str(exc), FAILED)
        except OSError as exc:  # an unwritable or missing path the user named: say which, no traceback
            where = f" {exc.filename}" if exc.filename else ""
            fail(f"cannot use{where}: {exc.strerror or exc}", FAILED)

    return wrapper
