"""Names a package exports but imports only when first used (PEP 562), so importing the package stays light."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package`: each name of `names` (name -> module) is imported from its module on
    first use and kept in the package's namespace; any other name is an `AttributeError`.

    Use: ``__getattr__ = lazy_names(__name__, {"evolve": "agentgrad.runtime.evolve"})``.
    """
    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
