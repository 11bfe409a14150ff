"""The run's accounts: every call of a user function reserves its budget, is logged, and settles its spend.

`Accounts` is the part of the engine that talks to the budget meter: `reserve` before a call is dispatched (or
`OutOfBudget`), `settle` when it ends (a cancelled call is charged its reservation), `budgeted` for both around
one call, and `time_left` for the loop's deadline.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentgrad.runtime.budget import KINDS, RUN_CALLS, Ledger, OutOfBudget
from agentgrad.runtime.calls import Caller, CallOutcome, Slots
from agentgrad.runtime.records import Recorder
from agentgrad.store.kinds import EventKind

NEVER_STARTED = "cancelled before it started"  # the error of a call cancelled while it waited for a slot
STOP_GUARD = 0.02  # seconds (at most 2% of the budget) the loop stops early: cancelling in-flight work takes 2-6 ms


class Accounts:
    """Budgeted calls: each call of a user function reserves its budget, is logged in `journal`, and settles.

    Args:
        journal: the run's journal (event log, counters, call ids, clock).
        meter: the budget ledger.
        caller: runs the user's functions (threads, timeouts).
    State: the meter, and `held_out_amounts` (what one held-out call reserves, from `Ledger.unhold`).
    """

    def __init__(self, journal: Recorder, meter: Ledger, caller: Caller) -> None:
        self.journal, self.meter, self.caller = journal, meter, caller
        self.held_out_amounts: dict[str, float] = {}

    def time_left(self) -> float:
        """Seconds until the loop must stop (inf when the wall time is unlimited): the wall-time budget less
        `STOP_GUARD` of it, the time cancelling the work in flight takes, so the loop ends within the budget."""
        limit = self.meter.budget.limit("wall_time")
        return limit - min(STOP_GUARD, 0.02 * limit) - self.journal.elapsed()

    def _amounts(self, kind: str) -> dict[str, float]:
        if kind == "test_evals":  # held-out calls draw on tokens and cost only, from the room set aside for them
            return dict(self.held_out_amounts)
        return self.meter.per_call(kind)

    def reserve(self, kind: str) -> tuple[int, dict[str, float]]:
        """Reserve one call of `kind` (and its token and cost bound) and log the dispatch; or raise OutOfBudget.
        The wall-time budget bounds the loop: held-out calls (`test_evals`) come after it."""
        amounts = self._amounts(kind)
        if (kind != "test_evals" and self.time_left() <= 0) or not self.meter.reserve(amounts):
            raise OutOfBudget(kind)
        call_id = self.journal.calls
        self.journal.calls += 1
        self.journal.log_soon(EventKind.DISPATCH, {"call": call_id, "kind": kind, "reserved": amounts})
        return call_id, amounts

    def affordable(self, kind: str, calls: int) -> bool:
        """True if `calls` more calls of `kind` fit in every budget they draw on (count, tokens, cost)."""
        return all(self.meter.remaining(k) >= amount * calls - 1e-9 for k, amount in self._amounts(kind).items())

    def settle(self, call_id: int, kind: str, reserved: dict[str, float], outcome: CallOutcome | None,
               subject: str, *, started: bool = True) -> None:
        """Turn a reservation into use and log the result (`subject`: the task id, or for a repair the diff id).

        `outcome` None means the call was cancelled: after it `started`, it is charged its reservation (it may
        have spent that much), exactly as a resumed run counts a call that never reported back; before (it was
        still waiting for a slot, as the gate's window cancels its queued calls once the verdict is certain) the
        reservation is given back, and the log says it never ran.
        """
        if outcome is None and not started:
            self.meter.release(reserved)
            self.journal.log_soon(EventKind.DONE, {"call": call_id, "kind": kind, "task": subject, "actual": {},
                                                   "error": NEVER_STARTED, "seconds": 0.0})
            return
        if outcome is None:
            actual = dict(reserved)
            error: str | None = "cancelled"
            seconds = 0.0
        else:
            actual = {kind: 1.0, "tokens": float(outcome.usage.tokens), "cost": outcome.usage.cost}
            if kind not in KINDS:
                del actual[kind]
            if kind in RUN_CALLS:
                actual["calls"] = 1.0
            error, seconds = outcome.error, outcome.seconds
        self.meter.settle(reserved, actual)
        self.journal.log_soon(EventKind.DONE, {"call": call_id, "kind": kind, "task": subject, "actual": actual,
                               "error": error, "seconds": seconds})
        if self.journal.callbacks:
            self.journal.tell(EventKind.CALL, {"call": call_id, "stage": kind, "task": subject, "error": error,
                               "seconds": seconds, "end": self.journal.clock(), "tokens": actual.get("tokens", 0.0),
                               "cost": actual.get("cost", 0.0)})

    async def budgeted(self, kind: str, fn: Callable[..., Any], args: tuple[Any, ...], slots: Slots,
                       subject: str, *, text_result: bool = False,
                       late: Callable[[], tuple[Any, ...]] | None = None,
                       patience: float | None = None) -> CallOutcome:
        """Reserve, call `fn(*args)` within `slots`, settle; a cancelled call is charged its reservation.

        Gate evaluations wait for a slot ahead of rollouts: they decide what the rollouts already proposed. `late`
        makes the arguments once the slot is granted (see `Caller.call`)."""
        call_id, reserved = self.reserve(kind)
        outcome: CallOutcome | None = None
        priority = 0 if kind == "gate_evals" else 1
        began = False

        def granted() -> tuple[Any, ...]:  # the caller makes the arguments once the slot is granted
            nonlocal began
            began = True
            return late() if late is not None else args

        try:
            if text_result:
                outcome = await self.caller.run(fn, *args, slots=slots, priority=priority, late=granted,
                                                patience=patience)
            else:
                outcome = await self.caller.call(fn, *args, slots=slots, priority=priority, late=granted,
                                                 patience=patience)
        finally:
            self.settle(call_id, kind, reserved, outcome, subject, started=began)
        return outcome

