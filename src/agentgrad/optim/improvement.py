"""`accept_if_better`: commit a diff when its mean score on the evidence beats the head's, with no significance test.

This is the admission rule of the published GEPA loop (and of most hill-climbing optimizers): after a candidate
beat its parent on a minibatch, it is scored on the whole validation split and served when its mean there is
higher than the best so far. It spends no calls on certainty, so it learns fast where scores are exact, and it
has no guard against answer noise: a change with no effect is accepted whenever noise gives it more wins than
losses. An exact tie is never accepted (the gain must exceed `margin`, which is at least 0).

It judges in one look (it never holds a candidate for more tasks). Like `accept_if` it refuses L0 artifacts,
holds candidates whose evidence was gathered on an older head for a re-check, holds L1 ones without a full
held-out check, and with `best_only` accepts the best candidate per artifact per step (the others are DEFERRED).
The state is `AcceptanceState`, so a run can switch rules between resumes of its state dict.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentgrad.core._checks import integer, number
from agentgrad.core.artifact import Layer
from agentgrad.core.decision import Decision, Outcome
from agentgrad.optim.acceptance import STAGE, AcceptanceState, head_of, held_before_commit
from agentgrad.optim.base import Batch, Candidate, Context, Head, Stage, verdict


def _numbers(candidate: Candidate) -> dict[str, float]:
    wins, losses = candidate.evidence.wins_losses()
    return {"n": float(len(candidate.evidence.rows)), "wins": wins, "losses": losses,
            "mean_gain": candidate.evidence.mean_delta() if candidate.evidence.rows else 0.0, "look": 1.0}


def _describe(numbers: dict[str, float]) -> str:
    return (f"mean gain {numbers['mean_gain']:+.4f} over {int(numbers['n'])} task(s) ({int(numbers['wins'])} wins, "
            f"{int(numbers['losses'])} losses)")


def _judge(candidate: Candidate, head: Head, *, margin: float, min_examples: int) -> Decision | None:
    """The verdict for one candidate, or None if it may be accepted (subject to `best_only`)."""
    numbers = _numbers(candidate)
    if head.layer is Layer.L0:
        return verdict(candidate, Outcome.REFUSED, STAGE, "the artifact is L0 (frozen): nothing may change it",
                       numbers)
    if numbers["n"] < max(1, min_examples):
        return verdict(candidate, Outcome.REJECTED, STAGE,
                       f"only {int(numbers['n'])} example(s), fewer than the {max(1, min_examples)} required", numbers)
    if numbers["mean_gain"] <= margin:
        return verdict(candidate, Outcome.REJECTED, STAGE, f"no better than the head: {_describe(numbers)}, not above "
                       f"{margin:g}", numbers)
    return held_before_commit(candidate, head, "better", _describe(numbers), numbers)


def _pick(passers: Sequence[Candidate], best_only: bool) -> dict[str, Decision]:
    """ACCEPTED for the passers; with `best_only`, DEFERRED for all but the highest mean gain per artifact."""
    best: dict[str, Candidate] = {}
    for candidate in passers:
        aid = candidate.diff.artifact_id
        if aid not in best or (-candidate.evidence.mean_delta(), candidate.diff.id) < \
                (-best[aid].evidence.mean_delta(), best[aid].diff.id):
            best[aid] = candidate
    out: dict[str, Decision] = {}
    for candidate in passers:
        numbers, winner = _numbers(candidate), best[candidate.diff.artifact_id]
        if best_only and winner is not candidate:
            out[candidate.diff.id] = verdict(
                candidate, Outcome.DEFERRED, STAGE, f"better than the head ({_describe(numbers)}), but "
                f"{winner.diff.id} is better this step and only one change per artifact is committed per step; it will "
                "be rebased", numbers)
        else:
            out[candidate.diff.id] = verdict(candidate, Outcome.ACCEPTED, STAGE,
                                             f"better than the head: {_describe(numbers)}", numbers)
    return out


def accept_if_better(*, margin: float = 0.0, min_examples: int = 1, best_only: bool = True
                     ) -> Stage[AcceptanceState]:
    """The mean-improvement admission rule as a stage named "accept" (module doc).

    Args:
        margin: the mean gain per task a candidate must exceed, in [0, 1) (0: any improvement).
        min_examples: fewer paired examples than this (and than 1) is a rejection.
        best_only: accept at most one diff per artifact per step; the other passers are DEFERRED.
    """
    number(margin, "margin", low=0.0, below=1.0)
    integer(min_examples, "min_examples", low=0)

    def update(batch: Batch, state: AcceptanceState, ctx: Context) -> tuple[Batch, AcceptanceState]:
        decided: dict[str, Decision] = {}
        passers: list[Candidate] = []
        for candidate in batch.candidates:
            decision = _judge(candidate, head_of(ctx, candidate.diff.artifact_id), margin=margin,
                              min_examples=min_examples)
            if decision is None:
                passers.append(candidate)
            else:
                decided[candidate.diff.id] = decision
        decided.update(_pick(passers, best_only))
        ordered = {c.diff.id: (c, decided[c.diff.id]) for c in batch.candidates}
        keep = [c for c, d in ordered.values() if d.outcome is Outcome.ACCEPTED]
        return batch.settle(ordered, keep=keep), state.counted([d for _, d in ordered.values()])

    return Stage(STAGE, AcceptanceState, update, AcceptanceState.load)
