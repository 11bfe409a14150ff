"""Tracking as callbacks: objects you pass to `evolve(..., callbacks=[...])`, never parameters of the run.

`JsonlEvents` needs nothing extra. `MlflowTracker` (extra ``mlflow``) and `OtelSpans` (extra ``otel``) load
their modules on first use, and import MLflow or OpenTelemetry only when one is made, so importing this package
stays light and works without the extras.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from agentgrad.tracking.jsonl import JsonlEvents

if TYPE_CHECKING:
    from agentgrad.tracking.mlflow import MlflowTracker
    from agentgrad.tracking.otel import OtelSpans

_LAZY = {"MlflowTracker": "agentgrad.tracking.mlflow", "OtelSpans": "agentgrad.tracking.otel"}

__all__ = ["JsonlEvents", "MlflowTracker", "OtelSpans"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentgrad.tracking' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
