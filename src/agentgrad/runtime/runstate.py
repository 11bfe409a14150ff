"""`RunState`: everything a checkpoint holds, as one value, so a checkpoint and a resume are one `state_dict` /
`load_state_dict` pair of the engine.

It gathers the state dicts of the run's collaborators (the aggregator, the duration estimator, the promotion
schedule, the noise estimate) and the journal's counters (events counted, calls handed out, steps done, the wall
time so far), with `seq`, the last event of the log the checkpoint covers. `from_dict` checks the shape and the
types before anything is loaded: a malformed checkpoint raises `StateDictError` and changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from agentgrad.core._checks import is_integer, is_number
from agentgrad.errors import StateDictError

_COLLABORATORS = ("aggregator", "estimator", "promotion", "noise")


@dataclass(frozen=True)
class RunState:
    """A run's resumable state (see the module docstring); `to_dict` / `from_dict` are JSON-ready."""

    step: int
    seq: int
    calls: int
    wall_time: float
    counts: Mapping[str, int]
    promotion_due: bool
    aggregator: Mapping[str, Any]
    estimator: Mapping[str, Any]
    promotion: Mapping[str, Any]
    noise: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "counts": dict(self.counts)}

    @classmethod
    def from_dict(cls, data: object) -> RunState:
        """The state `to_dict` wrote; `StateDictError` naming what is wrong with anything else."""
        if not isinstance(data, Mapping):
            raise StateDictError(f"a run state must be a mapping, got {type(data).__name__}")
        try:
            counts = data["counts"]
            parts = {name: data[name] for name in _COLLABORATORS}
            numbers = (data["step"], data["seq"], data["calls"], data["wall_time"], data["promotion_due"])
        except KeyError as exc:
            raise StateDictError(f"bad run state: missing {exc.args[0]!r}") from exc
        for name, part in parts.items():
            if not isinstance(part, Mapping):
                raise StateDictError(f"bad run state: {name} must be a mapping, got {type(part).__name__}")
        if not isinstance(counts, Mapping) or not all(is_integer(v, low=0) for v in counts.values()):
            raise StateDictError(f"bad run state: counts must map names to ints >= 0, got {counts!r}")
        step, seq, calls, wall_time, due = numbers
        if not all(is_integer(v, low=0) for v in (step, seq, calls)) or not is_number(wall_time, low=0, finite=False) \
                or not isinstance(due, bool):
            raise StateDictError(f"bad run state: step, seq, calls, wall_time, promotion_due = {numbers!r}")
        return cls(step, seq, calls, float(wall_time), {str(k): int(v) for k, v in counts.items()}, due,
                   parts["aggregator"], parts["estimator"], parts["promotion"], parts["noise"])
