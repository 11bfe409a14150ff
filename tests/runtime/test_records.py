"""The run's log as the runtime writes it: events in order, step outcomes all-or-none, callbacks, odd text."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from agentgrad.runtime.records import Recorder
from agentgrad.runtime.resume import used_from_events
from agentgrad.store.events import EventLog
from agentgrad.store.kinds import EventKind


def test_emitted_events_are_logged_in_order_before_the_callbacks_see_them(tmp_path: Path) -> None:
    log = EventLog(tmp_path)
    seen: list[tuple[str, int]] = []
    recorder = Recorder(log, time.monotonic, [lambda kind, payload: seen.append((kind, log.count(kind)))])
    recorder.emit(EventKind.PROPOSAL, {"n": 1})
    recorder.emit_many([(EventKind.DECISION, {"n": 2}), (EventKind.COMMIT, {"n": 3})])
    assert [(e.kind, e.payload["n"]) for e in log.read()] == [("proposal", 1), ("decision", 2), ("commit", 3)]
    assert seen == [("proposal", 1), ("decision", 1), ("commit", 1)]
    log.close()


def test_callbacks_hear_of_a_units_events_only_after_it_committed(tmp_path: Path) -> None:
    log = EventLog(tmp_path)
    seen: list[tuple[str, int]] = []
    recorder = Recorder(log, time.monotonic, [lambda kind, payload: seen.append((kind, log.count(kind)))])
    with recorder.unit():
        recorder.emit(EventKind.STEP, {"n": 1})
        recorder.emit(EventKind.STEP_DONE, {"n": 1})
        assert seen == []
    assert seen == [("step", 1), ("step_done", 1)]
    with pytest.raises(RuntimeError), recorder.unit():
        recorder.emit(EventKind.STEP, {"n": 2})
        raise RuntimeError("the step died")
    assert seen == [("step", 1), ("step_done", 1)] and log.count("step") == 1  # nothing heard of a rolled-back unit
    log.close()


def test_a_group_of_events_is_logged_all_or_none(tmp_path: Path) -> None:
    log = EventLog(tmp_path)
    with pytest.raises(TypeError):
        log.append_many([("decision", {"n": 1}), ("commit", {"bad": object()})])
    assert log.read() == []
    log.close()


def test_text_with_a_lone_surrogate_round_trips_through_the_log(tmp_path: Path) -> None:
    log = EventLog(tmp_path)
    log.append("proposal_failed", {"error": "bad \ud800 text", "note": "naïve"})
    log.put("checkpoint", {"text": "\udfff"})
    assert log.read()[0].payload == {"error": "bad \ud800 text", "note": "naïve"}
    assert log.get("checkpoint") == {"text": "\udfff"}
    log.close()


def _dispatch(log: EventLog, call: int, kind: str, reserved: dict[str, Any]) -> None:
    log.append("dispatch", {"call": call, "kind": kind, "reserved": reserved})


def test_budget_use_from_the_log_counts_unfinished_calls_at_their_reservation(tmp_path: Path) -> None:
    log = EventLog(tmp_path)
    _dispatch(log, 0, "rollouts", {"rollouts": 1.0, "tokens": 100.0})
    _dispatch(log, 1, "rollouts", {"rollouts": 1.0, "tokens": 100.0})
    log.append("done", {"call": 0, "kind": "rollouts", "actual": {"rollouts": 1.0, "tokens": 30.0, "cost": 0.0}})
    used = used_from_events(log)
    assert used["rollouts"] == 2.0 and used["tokens"] == 130.0  # call 1 may have spent its whole reservation
    log.close()


@pytest.mark.parametrize("asynchronous", [False, True])
def test_every_call_is_logged_durably_before_the_user_function_starts(tmp_path: Path, asynchronous: bool) -> None:
    from agentgrad.data.task import Task
    from agentgrad.runtime.budget import Budget
    from tests.runtime.helpers import agent, run

    bot = agent()
    reader = EventLog(tmp_path)  # another connection: it sees only what was committed
    started = {"calls": 0, "short": 0}

    held_out = {t.id for t in bot.splits().test}  # scored after the loop (dispatched too, not counted here)

    async def spy(rendered: str, task: Task) -> str:
        if task.id not in held_out:
            started["calls"] += 1
            started["short"] += reader.count("dispatch") < started["calls"]  # this call's dispatch is not durable
        return await bot.run(rendered, task)

    try:
        result = run(tmp_path, bot, run=spy, asynchronous=asynchronous, budget=Budget(rollouts=24, gate_evals=120))
    finally:
        reader.close()
    assert result.ok and started["calls"] > 24
    assert started["short"] == 0


def test_deferred_events_keep_their_order_and_are_written_by_the_next_write(tmp_path: Path) -> None:
    log = EventLog(tmp_path)
    log.append("dispatch", {"call": 0}, defer=True)
    log.append("done", {"call": 0}, defer=True)
    assert log.deferred == 2
    other = EventLog(tmp_path)
    assert other.count("dispatch") == 0  # not written yet
    log.append("decision", {"diff": "d1"})
    assert log.deferred == 0
    assert [e.kind for e in other.read()] == ["dispatch", "done", "decision"]
    log.append("dispatch", {"call": 1}, defer=True)
    log.close()  # closing writes what waits
    assert other.count("dispatch") == 2
    other.close()


def test_the_elapsed_time_is_noted_in_the_log_while_the_loop_runs(tmp_path: Path) -> None:
    import anyio

    from agentgrad.testing.clock import FakeClock

    log, clock = EventLog(tmp_path), FakeClock()
    recorder = Recorder(log, clock.now, [])
    recorder.wall_every = 0.01
    recorder.wall_before = 2.0

    async def main() -> None:
        async with recorder.group_commit():
            await anyio.sleep(0.02)  # the flusher is waiting
            clock.advance(5.0)
            await anyio.sleep(0.05)  # it wakes by itself, with nothing to write

    anyio.run(main)
    assert log.get("wall") == {"wall_time": 7.0}
    log.close()
