"""The runtime: the values `evolve` takes and gives back, and `replay`.

`evolve` itself is `agentgrad.evolve` (`agentgrad.runtime.evolve` is the module that defines it). Its settings are
`Budget`, `Workers`, `Staleness` (with its `StalePolicy`), `Acceptance`, `GateConfig` and `RunConfig`; it returns
a `Result`, whose `RunUsage` says what the run spent and whose `FrontierEntry` values name the examples only
changes it did not commit won. A value your functions return may carry a `.usage` (a
`CallCost`, or any object with tokens and cost) that is charged to the budgets. `replay` re-runs a run's logged
optimizer steps through a fresh aggregator (a `ReplayReport`); `verdict_is_certain` is the gate's exact early
stop. The loops, the engine and the rest of this package's modules are internal.

Each name here imports its module when first used (PEP 562), so `from agentgrad import Budget` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentgrad._lazy import lazy_names

if TYPE_CHECKING:
    from agentgrad.runtime.budget import Budget
    from agentgrad.runtime.calls import CallCost
    from agentgrad.runtime.config import Acceptance, RunConfig, Staleness, StalePolicy, Workers
    from agentgrad.runtime.frontier import FrontierEntry
    from agentgrad.runtime.gate import verdict_is_certain
    from agentgrad.runtime.gateconfig import GateConfig
    from agentgrad.runtime.result import Result, RunUsage
    from agentgrad.runtime.resume import ReplayReport, replay

_LAZY = {
    "Budget": "agentgrad.runtime.budget", "CallCost": "agentgrad.runtime.calls",
    "Acceptance": "agentgrad.runtime.config", "RunConfig": "agentgrad.runtime.config",
    "Staleness": "agentgrad.runtime.config", "StalePolicy": "agentgrad.runtime.config",
    "Workers": "agentgrad.runtime.config", "FrontierEntry": "agentgrad.runtime.frontier",
    "GateConfig": "agentgrad.runtime.gateconfig",
    "verdict_is_certain": "agentgrad.runtime.gate", "Result": "agentgrad.runtime.result",
    "RunUsage": "agentgrad.runtime.result", "ReplayReport": "agentgrad.runtime.resume",
    "replay": "agentgrad.runtime.resume",
}


__getattr__ = lazy_names(__name__, _LAZY)


__all__ = [
    "Acceptance", "Budget", "CallCost", "FrontierEntry", "GateConfig", "ReplayReport", "Result", "RunConfig",
    "RunUsage", "StalePolicy", "Staleness", "Workers", "replay", "verdict_is_certain",
]
