"""The loops inject their policy into the shared stages: the stages never ask which runtime they are in."""

from __future__ import annotations

import re
from pathlib import Path

from agentgrad.runtime.async_loop import run_async
from agentgrad.runtime.engine import Engine
from agentgrad.runtime.policy import ASYNC, SYNC
from agentgrad.runtime.sync_loop import run_sync
from agentgrad.testing.agents import WorldAgent
from tests.runtime.helpers import on_engine


def test_each_loop_sets_its_policy_on_the_engine_it_runs(tmp_path: Path) -> None:
    seen: list[object] = []

    async def body(engine: Engine, bot: WorldAgent) -> None:
        await run_sync(engine)
        seen.append(engine.policy)
        await run_async(engine)
        seen.append(engine.policy)

    on_engine(tmp_path, body)
    assert seen == [SYNC, ASYNC]
    assert not SYNC.live_cache and not SYNC.windowed and not SYNC.hedge
    assert ASYNC.live_cache and ASYNC.windowed and ASYNC.hedge


def test_no_shared_stage_branches_on_the_runtime_it_is_in() -> None:
    root = Path(__file__).parents[2] / "src" / "agentgrad" / "runtime"
    shared = ("engine.py", "gate.py", "pacing.py", "stale.py", "replicate.py", "promote.py", "accounts.py")
    for name in shared:
        uses = [line for line in (root / name).read_text().splitlines()
                if re.search(r"config\.asynchronous", line) and "policy" not in line]
        assert not uses, (name, uses)
