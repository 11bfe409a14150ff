"""Python callables named in a configuration file as ``"module:function"`` (or ``"package.module:Class.method"``).

A module next to the configuration file can be named: its directory is put on the import path (once, at the
front) before the import is tried, as a test runner does with its root directory.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _add_to_path(folder: Path | None) -> None:
    if folder is not None and str(folder) not in sys.path:
        sys.path.insert(0, str(folder))


def resolve_callable(spec: str, folder: Path | None = None) -> Callable[..., Any]:
    """The callable `spec` names; `ValueError` saying what was expected when it is malformed, does not import,
    has no such attribute or is not callable."""
    module_name, colon, attribute = spec.partition(":")
    if not colon or not module_name or not attribute:
        raise ValueError(f"expected 'module:function', got {spec!r}")
    _add_to_path(folder)
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"expected an importable 'module:function', but {spec!r} does not import ({exc})") from None
    except Exception as exc:  # noqa: BLE001 - the user's module failed while importing: say so, with its error
        raise ValueError(f"importing {module_name!r} for {spec!r} failed: {type(exc).__name__}: {exc}") from None
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise ValueError(f"expected {spec!r} to name a function, but {module_name!r} has no {attribute!r}")
        target = getattr(target, part)
    if not callable(target):
        raise ValueError(f"expected {spec!r} to be callable, got a {type(target).__name__}")
    function: Callable[..., Any] = target
    return function


_DOTTED = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*"
_SPEC = re.compile(f"{_DOTTED}:{_DOTTED}")


def check_import_path(spec: str, folder: Path | None, *, what: str = "", resolve: bool = True) -> None:
    """Raise `ValueError` unless `spec` names an importable callable (`what` prefixes the expectation). With
    `resolve` False only its form is checked and nothing is imported: the service checks a submitted configuration
    that way, so a write token never runs a module in the web process (the run's worker imports it, and fails
    the job, saying why, if it cannot)."""
    if ":" not in spec or (not resolve and _SPEC.fullmatch(spec) is None):
        raise ValueError(f"expected {what + ' ' if what else ''}'module:function', got {spec!r}")
    if resolve:
        resolve_callable(spec, folder)
