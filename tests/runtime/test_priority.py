"""Run slots served by priority: a gate call waiting for a slot goes before a waiting rollout."""

from __future__ import annotations

import anyio
import pytest

from agentgrad.runtime.priority import PrioritySemaphore


def test_a_freed_slot_goes_to_the_most_urgent_waiter_then_to_the_earliest() -> None:
    served: list[str] = []

    async def main() -> None:
        slots = PrioritySemaphore(1)
        await slots.acquire()

        async def wait(name: str, priority: int) -> None:
            async with slots.hold(priority):
                served.append(name)
                await anyio.sleep(0)

        async with anyio.create_task_group() as group:
            for name, priority in (("rollout-a", 1), ("gate-a", 0), ("rollout-b", 1), ("gate-b", 0)):
                group.start_soon(wait, name, priority)
                await anyio.wait_all_tasks_blocked()
            assert slots.waiting == 4
            slots.release()

    anyio.run(main)
    assert served == ["gate-a", "gate-b", "rollout-a", "rollout-b"]


def test_never_more_holders_than_slots() -> None:
    peak = {"now": 0, "max": 0}

    async def main() -> None:
        slots = PrioritySemaphore(3)

        async def work(i: int) -> None:
            async with slots.hold(i % 2):
                peak["now"] += 1
                peak["max"] = max(peak["max"], peak["now"])
                await anyio.sleep(0.001 * (i % 3))
                peak["now"] -= 1

        async with anyio.create_task_group() as group:
            for i in range(40):
                group.start_soon(work, i)

    anyio.run(main)
    assert peak == {"now": 0, "max": 3}


def test_a_cancelled_wait_takes_no_slot() -> None:
    async def main() -> int:
        slots = PrioritySemaphore(1)
        await slots.acquire()
        with anyio.move_on_after(0.01):
            await slots.acquire()
        assert slots.waiting == 0
        slots.release()
        return slots.free

    assert anyio.run(main) == 1


def test_releasing_more_often_than_acquiring_is_an_error() -> None:
    slots = PrioritySemaphore(2)
    with pytest.raises(RuntimeError, match="more often"):
        slots.release()
