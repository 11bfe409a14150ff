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
        cohort: under `Budget.calls`, rollouts go out in cohorts, as a synchronous round's do: up to the rollout
            workers at once on the current head, and no more while a proposal of the cohort waits for its proposer
            or its verdict; the aggregator waits for the cohort's candidates and takes them in one step. They are
            judged on one head (its scores paid once, shared through the cache) and compatible ones are fused into
            one version, where a stream of single candidates is judged on a head that is about to move (a re-check,
            or a duplicate of what just landed). No phase waits for another: a cohort's first proposal is judged
            while its last rollouts still run. The asynchronous runtime uses it. Measured on the learning
            benchmark's family 53 at 0.4 of its budgets (12 worlds, 4 draws), held-out accuracy at 16 workers:
            0.753 in cohorts, 0.695 with one proposal in the pipeline (the earlier setting), 0.520 with the gate
            workers' backlog (`pacing.BACKLOG`, the rule without cohorts); the synchronous runtime 0.752, in
            1.87x the wall time of cohorts.
    """

    live_cache: bool
    windowed: bool
    hedge: bool
    wait_deferred: bool = False
    cohort: bool = False


SYNC = LoopPolicy(live_cache=False, windowed=False, hedge=False)
ASYNC = LoopPolicy(live_cache=True, windowed=True, hedge=True, wait_deferred=True, cohort=True)
