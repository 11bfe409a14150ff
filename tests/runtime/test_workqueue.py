"""The gate's inbox: work sent back goes first, new proposals are bounded, the queue ends with its producers."""

from __future__ import annotations

import anyio
import pytest

from agentgrad.runtime.workqueue import WorkQueue


def test_work_sent_back_is_taken_before_waiting_proposals() -> None:
    async def main() -> list[str]:
        queue = WorkQueue[str](4, producers=1)
        await queue.put("new-1")
        await queue.put("new-2")
        queue.put_urgent("back-1")
        queue.producer_done()
        return [item async for item in queue]

    assert anyio.run(main) == ["back-1", "new-1", "new-2"]


def test_a_full_queue_holds_the_proposer_back_until_a_gate_worker_takes_one() -> None:
    order: list[str] = []

    async def main() -> None:
        queue = WorkQueue[int](2, producers=1)

        async def producer() -> None:
            for i in range(4):
                await queue.put(i)
                order.append(f"put{i}")
            queue.producer_done()

        async with anyio.create_task_group() as group:
            group.start_soon(producer)
            await anyio.wait_all_tasks_blocked()
            assert len(queue) == 2 and order == ["put0", "put1"]  # the third put waits
            queue.put_urgent(99)  # the urgent lane never blocks, even on a full queue
            assert len(queue) == 3
            got = [item async for item in queue]
        assert got == [99, 0, 1, 2, 3]

    anyio.run(main)


def test_iteration_ends_only_when_every_producer_is_done() -> None:
    async def main() -> tuple[bool, list[int]]:
        queue = WorkQueue[int](4, producers=2)
        queue.producer_done()
        got: list[int] = []
        with anyio.move_on_after(0.05) as scope:
            got += [item async for item in queue]
        still_open = scope.cancelled_caught
        await queue.put(7)
        queue.producer_done()
        got += [item async for item in queue]
        return still_open, got

    assert anyio.run(main) == (True, [7])


def test_a_producer_closing_twice_is_an_error() -> None:
    queue = WorkQueue[int](1, producers=1)
    queue.producer_done()
    with pytest.raises(RuntimeError, match="more often"):
        queue.producer_done()
