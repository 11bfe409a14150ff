"""A checkpoint is one value: the engine's `state_dict` round-trips, and a malformed one changes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from agentgrad.errors import StateDictError
from agentgrad.runtime.engine import Engine
from agentgrad.runtime.runstate import RunState
from agentgrad.testing.agents import WorldAgent
from tests.runtime.helpers import agent, build_engine, on_engine, run


def _comparable(state: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in state.items() if k not in ("seq", "wall_time")}


def test_the_engine_state_after_a_run_round_trips_into_a_fresh_engine(tmp_path: Path) -> None:
    run(tmp_path / "done", agent(), asynchronous=False)  # a run with steps, verdicts, counters and noise

    async def check(engine: Engine, bot: WorldAgent) -> None:
        state = engine.journal.events.get("checkpoint")
        assert state["step"] > 0 and state["counts"]
        fresh = build_engine(tmp_path / "fresh", bot)
        try:
            assert fresh.load_state_dict(state) == state["seq"]
            assert _comparable(fresh.state_dict()) == _comparable(state)
        finally:
            fresh.store.close()

    on_engine(tmp_path / "done", check)


def test_a_malformed_state_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    async def check(engine: Engine, bot: WorldAgent) -> None:
        engine.journal.counts["rollouts"] = 7
        before = _comparable(engine.state_dict())
        good = engine.state_dict()
        for bad in ({**good, "counts": {"rollouts": -1}}, {**good, "step": True}, {**good, "aggregator": [1]},
                    {k: v for k, v in good.items() if k != "noise"}, "not a mapping"):
            with pytest.raises(StateDictError):
                engine.load_state_dict(bad)  # type: ignore[arg-type]
            assert _comparable(engine.state_dict()) == before

    on_engine(tmp_path, check)


def test_run_state_round_trips_through_its_dict() -> None:
    state = RunState(3, 40, 12, 1.5, {"rollouts": 4}, True, {"a": 1}, {"b": 2}, {"c": 3}, {"d": 4})
    assert RunState.from_dict(state.to_dict()) == state
    anyio.run(anyio.sleep, 0)  # (no event loop state leaks between tests)
