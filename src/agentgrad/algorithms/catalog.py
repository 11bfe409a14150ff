"""The recipes by name, for configuration files (``[recipe] name = "gepa"``): an explicit table of the entry
points, each imported when asked for (no registry: adding a method means adding a line here)."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any

from agentgrad.errors import ConfigError

NAMES = ("ace", "adas", "dgm", "evoskill", "gepa", "meta_harness", "opro", "reflexion", "skillneo", "skillopt")


def entry_point(name: str) -> Callable[..., Any]:
    """The one-line entry point of method `name` (``agentgrad.algorithms.<name>.<name>``)."""
    if name not in NAMES:
        raise ConfigError(f"unknown recipe {name!r}; the recipes are {list(NAMES)}")
    entry: Callable[..., Any] = getattr(import_module(f"agentgrad.algorithms.{name}"), name)
    return entry
