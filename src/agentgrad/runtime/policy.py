"""`LoopPolicy`: what a loop asks of the stages both runtimes share, injected by the loop that runs them.

The synchronous loop wants every decision to be a function of the run's seed and the round's inputs; the
asynchronous one wants the freshest view and never to wait on a straggler. The stages read these switches from
the engine's `policy` (set by `run_sync` / `run_async` when they start) instead of asking which runtime they are in.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LoopPolicy:
    """Switches the loop sets on the shared stages.

    Args:
        live_cache: the gate plans from the score cache as it is now (True), or as the round began (False: plans
            never depend on the order calls finish in).
        windowed: the gate keeps a window of calls in flight and decides as they land (True), or scores fixed
            chunks (False).
        hedge: a call running far past its expected duration is cut off and started again (`RunConfig.hedge`).
        wait_deferred: a candidate the governance stage deferred (an L1 change waiting for the one in its full
            check) waits for a verdict before it goes back to the aggregator (True), instead of coming back at
            once (False: a synchronous round brings it back at the next step anyway).
        pipeline: under `Budget.calls`, the most proposals between a rollout's start and their verdict (rollouts
            in flight and proposals waiting for the gate or held by it), or None for `pacing.BACKLOG` times the
            gate workers. The asynchronous runtime keeps one: its candidate is scored on every run slot at once,
            and a second proposal made meanwhile is judged against a head that is about to move (a duplicate, or a
            re-check), which costs calls a tight budget cannot spare. Measured on the learning benchmark's worlds
            at half their budgets (5 worlds, 4 and 16 workers, 12 draws), mean held-out gain per run: 0.74 with
            one in the pipeline, 0.69 with two, 0.62 with the gate workers' backlog; the synchronous runtime
            0.76, in 1.46x the wall time of one in the pipeline.
    """

    live_cache: bool
    windowed: bool
    hedge: bool
    wait_deferred: bool = False
    pipeline: int | None = None


SYNC = LoopPolicy(live_cache=False, windowed=False, hedge=False)
ASYNC = LoopPolicy(live_cache=True, windowed=True, hedge=True, wait_deferred=True, pipeline=1)
