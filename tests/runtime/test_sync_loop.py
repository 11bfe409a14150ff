"""The synchronous round: its workers roll out only on tasks nothing is being done about, and a round always rolls
out at least once."""

from __future__ import annotations

from pathlib import Path

from agentgrad.runtime.engine import Engine
from agentgrad.runtime.sync_loop import _picks
from agentgrad.testing.agents import WorldAgent
from tests.runtime import helpers


def test_a_round_rolls_out_once_a_free_task_and_no_more(tmp_path: Path) -> None:
    async def body(engine: Engine, bot: WorldAgent) -> None:
        tasks = engine.pacing.tasks()  # the training tasks, and the validation ones of the widened pool
        assert len(_picks(engine, 0, len(tasks) + 5)) == len(tasks)  # more workers than tasks: one each, no repeat
        for task in tasks[1:]:
            engine.pacing.await_proposal(task)
        assert [task for _, task in _picks(engine, 0, 8)] == [tasks[0]]

    helpers.on_engine(tmp_path / "run", body)


def test_a_round_with_no_free_task_still_rolls_out_its_first_worker(tmp_path: Path) -> None:
    async def body(engine: Engine, bot: WorldAgent) -> None:
        for task in engine.pacing.tasks():
            engine.pacing.await_proposal(task)
        picks = _picks(engine, 0, 8)
        assert len(picks) == 1 and picks[0][0] == 0 and picks[0][1] in engine.train

    helpers.on_engine(tmp_path / "run", body)
