"""Accounts: a call is charged once it started; one cancelled while it waited for a slot is given back."""

from __future__ import annotations

import time
from pathlib import Path

import anyio

from agentgrad.runtime.accounts import NEVER_STARTED, Accounts
from agentgrad.runtime.budget import Budget, Ledger
from agentgrad.runtime.calls import Caller, Slots
from agentgrad.runtime.records import Recorder
from agentgrad.runtime.resume import used_from_events
from agentgrad.store.events import EventLog
from agentgrad.store.kinds import EventKind


def _accounts(log: EventLog, calls: int) -> Accounts:
    caller = Caller(threads=2, timeout=5.0, clock=time.monotonic)
    return Accounts(Recorder(log, time.monotonic, []), Ledger(Budget(calls=calls)), caller)


def test_a_call_cancelled_before_its_slot_came_is_not_charged_and_one_cancelled_while_running_is(
        tmp_path: Path) -> None:
    log = EventLog(tmp_path)
    accounts, slots = _accounts(log, calls=10), Slots(1)
    release = anyio.Event()

    async def slow(rendered: str, task: object) -> str:
        await release.wait()
        return "ok"

    async def main() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(accounts.budgeted, "gate_evals", slow, ("a", None), slots, "t1")
            group.start_soon(accounts.budgeted, "gate_evals", slow, ("b", None), slots, "t2")
            await anyio.sleep(0.05)  # t1 holds the one slot; t2 waits for it
            assert accounts.meter.remaining("calls") == 8  # both reserved
            group.cancel_scope.cancel()

    anyio.run(main)
    try:
        assert accounts.meter.remaining("calls") == 9  # t1 ran (charged), t2 never did (given back)
        done = {e.payload["task"]: e.payload for e in log.read([EventKind.DONE])}
        assert done["t1"]["error"] == "cancelled" and done["t1"]["actual"]["calls"] == 1.0
        assert done["t2"]["error"] == NEVER_STARTED and done["t2"]["actual"] == {}
        assert used_from_events(log)["calls"] == 1.0  # a resume counts the same
    finally:
        log.close()
