"""`chain(*stages)`: one stage that runs the given stages in order; its state is the tuple of theirs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentgrad.core.decision import Decision
from agentgrad.errors import ConfigError, StateDictError
from agentgrad.optim.base import Batch, Context, Stage, StageState


@dataclass(frozen=True)
class ChainState:
    """The states of a chain's stages, in order, with their names for a readable state dict."""

    names: tuple[str, ...]
    states: tuple[StageState, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"stages": [{"name": n, "state": s.to_dict()} for n, s in zip(self.names, self.states, strict=True)]}


def chain(*stages: Stage[Any], name: str = "chain") -> Stage[ChainState]:
    """Compose stages: `chain(a, b).update` is `b.update` after `a.update`, each on its own state.

    >>> pipeline = chain(drop_stale(), resolve_conflicts(), accept_if())  # doctest: +SKIP
    """
    names = tuple(s.name for s in stages)
    if len(set(names)) != len(names):
        raise ConfigError(f"stage names in a chain must be unique, got {names}")

    def init() -> ChainState:
        return ChainState(names, tuple(s.init() for s in stages))

    def update(batch: Batch, state: ChainState, ctx: Context) -> tuple[Batch, ChainState]:
        new_states = []
        for stage, inner in zip(stages, state.states, strict=True):
            batch, inner = stage.update(batch, inner, ctx)
            new_states.append(inner)
        return batch, ChainState(names, tuple(new_states))

    def observe(decisions: Sequence[Decision], state: ChainState, ctx: Context) -> ChainState:
        pairs = zip(stages, state.states, strict=True)
        return ChainState(names, tuple(s.observe(decisions, inner, ctx) for s, inner in pairs))

    def load(data: Mapping[str, Any]) -> ChainState:
        entries = data.get("stages")
        if not isinstance(entries, list) or [e.get("name") for e in entries] != list(names):
            got = [e.get("name") for e in entries] if isinstance(entries, list) else entries
            raise StateDictError(f"{name}: state dict has stages {got}, expected {list(names)}")
        return ChainState(names, tuple(s.load(e["state"]) for s, e in zip(stages, entries, strict=True)))

    return Stage(name, init, update, load, observe)
