"""Promotion `dev → stable`: after every K accepted commits, confirm on the whole validation split, then promote;
when the check finds `dev` worse, revert the commits that made it so.

The check scores the `dev` head and the `stable` head on every validation task (cached scores are reused, new
calls are charged to the gate budget). `stable` moves up to the checked version only if it does at least as well;
otherwise the policy asks again after K more commits. The test split is never used: it is only reported. The
asynchronous runtime runs checks in their own task (`dev` may move on meanwhile; the checked version is promoted),
so the aggregator never waits for one.

A failed check is attributed (`attribute`): for each commit between `stable` and the checked `dev`, newest first,
"dev without that commit" (the commit's inverse rebased onto the dev text) is scored against `dev` on the
validation tasks where `dev` and `stable` differ. A commit whose removal wins more of them than it loses, with a
sign-test confidence of at least 0.9, has a clearly negative leave-one-out contribution: it is harmful, and is
reverted as a new dev commit (`SQLiteStore.revert_commit`: REVERTED on the commit, ACCEPTED on its inverse, a
"revert" event). Reverts only ever add dev commits: `stable`
never moves back. A commit that is itself a revert, or already reverted, is left alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from agentgrad.core.artifact import Version
from agentgrad.core.decision import Outcome
from agentgrad.core.diff import Diff, apply, invert
from agentgrad.core.rebase import Conflict, rebase
from agentgrad.errors import ApplyConflictError, StaleHeadError
from agentgrad.optim.stats import prob_improvement
from agentgrad.runtime.budget import OutOfBudget
from agentgrad.runtime.engine import Engine
from agentgrad.runtime.records import Snapshot
from agentgrad.store.kinds import EventKind

REVERT_CONFIDENCE = 0.9  # how sure the leave-one-out must be that a commit hurts before it is reverted

Scores = Mapping[str, tuple[float, float]]  # task id -> (one text's score, the other's)
REVERT_STAGE = "revert"


@dataclass(frozen=True)
class Check:
    """A promotion check's figures: the dev and stable versions compared and their validation means."""

    dev: int
    stable: int
    dev_val: float
    stable_val: float


@dataclass(frozen=True)
class LeaveOneOut:
    """`dev` without one commit, scored against `dev` on the tasks where `dev` and `stable` differ.

    Args:
        version: the version the commit made.
        original: the committed diff.
        inverse: its inverse, rebased onto the checked dev text.
        wins, losses: tasks where "dev without it" scores above / below `dev`.
        tasks: the tasks compared.
    """

    version: int
    original: Diff
    inverse: Diff
    wins: int
    losses: int
    tasks: int

    @property
    def harmful(self) -> bool:
        """True when removing the commit helps, and clearly: its leave-one-out contribution is negative with a
        confidence of at least `REVERT_CONFIDENCE` (the sign test), so answer noise alone rarely reverts a good
        commit."""
        return self.wins > self.losses and prob_improvement(self.wins, self.losses, margin=0.0) >= REVERT_CONFIDENCE


async def maybe_promote(engine: Engine) -> bool:
    """Run a due promotion check; True if `stable` moved. A failed check reverts the harmful commits since
    `stable` (`revert_harmful`); a check without the budget to finish changes nothing."""
    if not engine.promotion_due:
        return False
    engine.promotion_due = False
    artifact_id = engine.artifact.id
    dev, stable = engine.store.head(artifact_id), engine.store.head(artifact_id, "stable")
    if dev.number == stable.number:
        engine.promotion.confirm(True)
        return False
    try:
        scores = await engine.gate.score_pairs((dev.text, stable.text), engine.val)
    except OutOfBudget:
        engine.journal.emit(EventKind.PROMOTION, {"dev": dev.number, "stable": stable.number,
                                                  "outcome": "no budget left"})
        return False
    check = Check(dev.number, stable.number, sum(d for d, _ in scores.values()) / len(scores),
                  sum(s for _, s in scores.values()) / len(scores))
    passed = check.dev_val >= check.stable_val
    engine.promotion.confirm(passed)
    about = {"dev": dev.number, "stable": stable.number, "dev_val": check.dev_val, "stable_val": check.stable_val}
    if passed:
        with engine.journal.unit():  # the stable move and its event: one transaction
            engine.store.promote_to({artifact_id: dev.number})
            engine.journal.emit(EventKind.PROMOTION, {**about, "outcome": "promoted"})
        return True
    reverted, complete = await revert_harmful(engine, dev, check, scores)
    engine.journal.emit(EventKind.PROMOTION, {**about, "outcome": "kept stable",
                                              "reverted": [v.number for v in reverted],
                                              "attribution": "done" if complete else "no budget left"})
    return False


async def revert_harmful(engine: Engine, dev: Version, check: Check, scores: Scores) -> tuple[list[Version], bool]:
    """Attribute a failed check to the commits since `stable` and revert each harmful one, newest first.

    Returns the revert versions and whether every commit could be judged (False: the budget ran out; the commits
    judged before that are still acted on)."""
    judged, complete = await attribute(engine, dev, check.stable, scores)
    versions = [v for v in (revert(engine, loo, check) for loo in judged if loo.harmful) if v is not None]
    return versions, complete


async def attribute(engine: Engine, dev: Version, stable: int, scores: Scores) -> tuple[list[LeaveOneOut], bool]:
    """Leave-one-out for each commit after version `stable` up to `dev`, newest first, on the validation tasks
    where `scores` (dev, stable) differ; a commit whose inverse does not rebase onto `dev` is skipped. Scores are
    the gate's cached, budgeted evaluations. Returns what was judged and False if the budget ran out."""
    differ = [t for t, (d, s) in scores.items() if d != s]
    judged: list[LeaveOneOut] = []
    for number in range(dev.number, stable, -1):
        made = inverse_on_dev(engine, number, dev)
        if made is None:
            continue
        original, inverse = made
        try:
            pairs = await engine.gate.score_pairs((apply(inverse, dev.text), dev.text), differ)
        except OutOfBudget:
            return judged, False
        wins = sum(1 for w, d in pairs.values() if w > d)
        losses = sum(1 for w, d in pairs.values() if w < d)
        judged.append(LeaveOneOut(number, original, inverse, wins, losses, len(differ)))
    return judged, True


def inverse_on_dev(engine: Engine, number: int, dev: Version) -> tuple[Diff, Diff] | None:
    """(the diff that made version `number`, its inverse rebased onto `dev`); None for version 0, a revert or an
    already reverted diff, or an inverse that does not rebase cleanly (or no longer changes anything)."""
    artifact_id = engine.artifact.id
    diff_id = engine.store.version(artifact_id, number).diff_id
    if diff_id is None:
        return None
    if any(d.stage == REVERT_STAGE or d.outcome is Outcome.REVERTED for d in engine.store.decisions(diff_id=diff_id)):
        return None
    original = engine.store.diff(diff_id)
    try:
        inverse = invert(original, engine.store.version(artifact_id, number - 1).text)
    except ApplyConflictError:
        return None
    moved = rebase(replace(inverse, base_version=number), dev.text, dev.number)
    if isinstance(moved, Conflict) or not moved.ops:
        return None
    return original, moved


def _reason(loo: LeaveOneOut, check: Check) -> str:
    return (f"promotion check: dev v{check.dev} scored {check.dev_val:.3f} on validation, stable v{check.stable} "
            f"{check.stable_val:.3f}; dev without v{loo.version} wins {loo.wins} and loses {loo.losses} of the "
            f"{loo.tasks} tasks where they differ")


def revert(engine: Engine, loo: LeaveOneOut, check: Check) -> Version | None:
    """Revert a harmful commit on the current dev head (its inverse rebased again if dev moved on since the
    check); None, with a "revert" event saying why, when that does not rebase or another writer moved dev."""
    artifact_id = engine.artifact.id
    head = engine.store.head(artifact_id)
    about = {"diff": loo.original.id, "version": loo.version, "head": head.number}
    moved = rebase(loo.inverse, head.text, head.number)
    if isinstance(moved, Conflict) or not moved.ops:
        engine.journal.emit(EventKind.REVERT, {**about, "outcome": "does not rebase onto the head"})
        return None
    reason = _reason(loo, check)
    numbers = {"dev_version": check.dev, "stable_version": check.stable, "dev_val": check.dev_val,
               "stable_val": check.stable_val, "wins": loo.wins, "losses": loo.losses, "tasks": loo.tasks,
               "p_without_better": prob_improvement(loo.wins, loo.losses, margin=0.0)}
    inverse = Diff(artifact_id, head.number, moved.ops, author=loo.original.author,
                   rationale=f"revert {loo.original.id}: {reason}")
    try:
        with engine.journal.unit():  # the revert commit, both verdicts and the events: one transaction
            version = engine.store.revert_commit(loo.original.id, inverse, reason=reason, numbers=numbers,
                                                 expected=head.number)
            _note(engine, loo.original, inverse, version, {**about, "outcome": "reverted", "reason": reason,
                                                           **numbers})
    except StaleHeadError:
        engine.journal.emit(EventKind.REVERT, {**about, "outcome": "dev moved meanwhile"})
        return None
    return version


def _note(engine: Engine, original: Diff, inverse: Diff, version: Version, about: Mapping[str, object]) -> None:
    """Move the engine onto a revert commit and log it: both verdicts, the commit and a "revert" event."""
    engine.head = Snapshot(version.number, version.text)
    engine.touched[version.number] = None  # a revert carries no evidence: re-checks across it start afresh
    engine.journal.counts["reverted"] += 1
    verdicts = [engine.store.decisions(diff_id=original.id)[-1], engine.store.decisions(diff_id=inverse.id)[-1]]
    engine.aggregator.observe(verdicts, engine.context())
    engine.journal.emit_many([*((EventKind.DECISION, d.to_dict()) for d in verdicts),
                      (EventKind.COMMIT, {"artifact": version.artifact_id, "version": version.number,
                                          "diff": inverse.id}),
                      (EventKind.REVERT, {**about, "revert_version": version.number, "revert_diff": inverse.id})])
