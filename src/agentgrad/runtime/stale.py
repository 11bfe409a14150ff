"""Stale diffs and work a step sends back: rebase before the gate, the keep / discard / repair policies, rechecks.

A diff made on a snapshot older than the head is rebased onto the head before it is evaluated when its lag is
within `Staleness.alpha_max` (always, with KEEP); otherwise, or when the rebase conflicts, it is recorded STALE.
With REPAIR, a STALE diff (found here or by the aggregator's staleness stage) goes to the user's
`repair(diff_dict, head_text)`, whose proposal for the current head becomes a new diff (id: the old id +
``-repair``; each diff is repaired at most once) that goes through the gate again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial

from agentgrad.core.artifact import content_hash
from agentgrad.core.decision import Decision, Outcome
from agentgrad.core.diff import Diff, apply
from agentgrad.core.evidence import Evidence
from agentgrad.optim.aggregator import StepResult
from agentgrad.optim.base import Candidate, Head
from agentgrad.optim.judge import contexts_to_pass, may_close
from agentgrad.optim.staleness import lag_of, move_to_head
from agentgrad.runtime.budget import OutOfBudget
from agentgrad.runtime.config import StalePolicy
from agentgrad.runtime.engine import Engine
from agentgrad.runtime.parking import EARLIER, Context, Earlier
from agentgrad.runtime.records import Proposed, Snapshot
from agentgrad.runtime.replicate import HeadWith, combined, is_fresh, keeps_whole, replicate, without_commits
from agentgrad.runtime.split import replication_reserve, triage
from agentgrad.store.kinds import EventKind

REPAIR_SUFFIX = "-repair"


def reanchor(engine: Engine, proposed: Proposed) -> Proposed | Decision:
    """Move a diff made on an older snapshot onto the current head, or record why it cannot be.

    Returns the admitted diff, or the recorded decision: STALE (too old, or the rebase conflicts) or DUPLICATE
    (the head already has its effect).
    """
    head, staleness = engine.head, engine.config.staleness
    if head.version <= proposed.diff.base_version:
        return proposed
    alpha = None if staleness.policy is StalePolicy.KEEP else staleness.alpha_max
    lag = None if engine.changes is None else \
        lag_of(proposed.diff, Head(head.version, head.text, changes=engine.changes.recent(head.version)))
    moved = move_to_head(proposed.diff, head.text, head.version, alpha, lag=lag)  # the one staleness rule (`optim`)
    if isinstance(moved, Diff):
        engine.journal.counts["rebased_before_gate"] += 1
        return Proposed(moved, head, proposed.origin)
    outcome, reason = moved
    why = reason if outcome is Outcome.DUPLICATE else f"stale before evaluation: {reason}"
    return engine.record_verdict(proposed.diff, Evidence(()), outcome, "gate", why)


def can_repair(engine: Engine, diff: Diff) -> bool:
    """True under the REPAIR policy for a diff that is not itself a repair."""
    return (engine.config.staleness.policy is StalePolicy.REPAIR and engine.user.repair is not None
            and not diff.id.endswith(REPAIR_SUFFIX))


async def admit(engine: Engine, proposed: Proposed) -> Proposed | None:
    """`reanchor`, and under the REPAIR policy hand a stale diff to `repair`."""
    fresh = reanchor(engine, proposed)
    if isinstance(fresh, Proposed):
        return fresh
    if fresh.outcome is Outcome.STALE and can_repair(engine, proposed.diff):
        return await repair(engine, proposed.diff)
    return None


async def repair(engine: Engine, diff: Diff) -> Proposed | None:
    """Ask `repair(diff_dict, head_text)` for a proposal on the current head and make it a new diff.

    The call is budgeted as a proposal. The new diff is logged as a proposal with ``repair_of`` and a "repair"
    event records what happened; None when the budget is out or the repair gives nothing usable (logged).
    """
    if engine.user.repair is None:
        return None
    head = engine.head
    try:
        outcome = await engine.accounts.budgeted("proposals", engine.user.repair, (diff.to_dict(), head.text),
                                        engine.propose_slots, diff.id)
    except OutOfBudget:
        engine.journal.counts["repairs_unaffordable"] += 1
        return None
    engine.journal.counts["repairs"] += 1
    about = {"task": None, "worker": diff.author, "repair_of": diff.id}
    repaired = engine.diff_from(outcome, head, diff.id + REPAIR_SUFFIX, diff.author, f"repair of {diff.id}", about)
    engine.journal.emit(EventKind.REPAIR, {"diff": diff.id, "repaired": None if repaired is None else repaired.id,
                           "head": head.version, "error": outcome.error})
    return None if repaired is None else Proposed(repaired, head, None)


async def admit_and_evaluate(engine: Engine, proposed: Proposed) -> Candidate | None:
    """A new proposal through the gate: re-anchored (or repaired) first, then screened and scored."""
    fresh = await admit(engine, proposed)
    return None if fresh is None else await engine.evaluate(fresh)


async def recheck(engine: Engine, candidate: Candidate, outcome: Outcome) -> Candidate | None:
    """Evaluate sent-back work again: a held candidate on the current head (on the whole validation split for a
    full check, on more tasks for EXTEND, its evidence kept, or its origin task again when held to replicate,
    `runtime.replicate`), a proposal an earlier session left unevaluated, or
    (STALE) a diff to repair."""
    diff = candidate.diff
    if outcome is Outcome.STALE:
        repaired = await repair(engine, diff)
        return None if repaired is None else await engine.evaluate(repaired)
    if outcome is Outcome.DEFERRED:
        if not engine.accounts.affordable("gate_evals", 1):
            engine.open.shelve(diff.id)  # nothing can decide it (nor the change it waits for): it stays open, and
            return None  # the run's end says so
        if engine.policy.wait_deferred:
            await engine.pacing.until_settled()  # the change it waits for is being checked: no use coming back now
    base = Snapshot(diff.base_version, engine.store.version(diff.artifact_id, diff.base_version).text)
    proposed = await admit(engine, Proposed(diff, base, None))
    if proposed is None:
        return None
    engine.journal.counts["rechecks"] += 1
    if outcome is Outcome.FULL_CHECK:
        return await engine.evaluate(proposed, full=True)
    if outcome is Outcome.EXTEND and not candidate.replicate and not candidate.shows_origin:
        await _base_scored(engine, proposed, candidate)
        if _focus_exhausted(engine, proposed, candidate):
            candidate = replace(candidate, replicate=True)  # no more tasks like its origin to win: replicate instead
    if (outcome is Outcome.EXTEND and candidate.replicate) or candidate.evidence.replicas:
        # a re-check of replicated evidence on a new head is one more replica there (and its touched rows), or its
        # closing look once no context can be paid for
        if calls_spent(engine) and may_close(len(candidate.evidence.replicas)):
            candidate = replace(candidate, closing=True)
        old = candidate.evidence.base_version
        changed = None if old is None else touched(engine, diff.artifact_id, old, proposed.snapshot.version)
        return await replicate(engine, proposed, candidate, changed)
    looks = candidate.looks + (outcome is Outcome.EXTEND)
    if outcome is Outcome.EXTEND:
        engine.journal.counts["extended"] += 1
    return await reverify(engine, proposed, candidate.evidence, looks=looks, origin=candidate.origin,
                          spread=_spreads(engine, proposed, candidate, outcome))


def _spreads(engine: Engine, proposed: Proposed, candidate: Candidate, outcome: Outcome) -> bool:
    """True if a change that holds its origin task (a demonstration, never replicated) is looked at again on every
    task: its focus has no task left to add, or past its first look its evidence has no focus (it spread before,
    or never had tasks like its origin), so a later look does not bring a focus back."""
    if not candidate.shows_origin or candidate.origin is None:
        return False
    if not candidate.evidence.focus:
        return candidate.looks > 1  # it spread before: it stays spread
    return outcome is Outcome.EXTEND and _focus_exhausted(engine, proposed, candidate)


def _further_tasks(engine: Engine, proposed: Proposed, candidate: Candidate) -> set[str]:
    """The tasks where a further look could show the candidate's gain that its evidence lacks (`Gate.further`)."""
    base, evidence = proposed.snapshot, candidate.evidence
    return engine.gate.further(base.text, base.version, candidate.origin, candidate.looks + 1, focus=evidence.focus,
                               scored={r.task_id for r in evidence.rows})


async def _base_scored(engine: Engine, proposed: Proposed, candidate: Candidate) -> None:
    """Score the base on the tasks a further look would add (calls that look makes anyway), all at once, so that
    whether it can still show a gain there is known before it is made; OutOfBudget if a call could not run."""
    if candidate.origin is not None:
        await engine.gate.score_each(proposed.snapshot.text, sorted(_further_tasks(engine, proposed, candidate)))


def _focus_exhausted(engine: Engine, proposed: Proposed, candidate: Candidate) -> bool:
    """True if a further look's plan has no new task where the candidate could win (`_further_tasks`): none at all
    (a fact of the task inputs), or only tasks the base is known to solve (its cached scores, not the candidate's:
    there the look could only tie or lose). With focus tasks: an override whose few special cases sit among tasks
    of its category that the category's rule already solves; without: a rule for a rare category whose other two
    tasks it won, among tasks the head solves (3 wins and no loss in 31 tasks, re-proposed 51 times)."""
    if candidate.origin is None:
        return False
    key, scores = content_hash(proposed.snapshot.text), engine.cache.scores
    return all(scores.get((key, task), 0.0) >= 1.0 for task in _further_tasks(engine, proposed, candidate))


async def reverify(engine: Engine, proposed: Proposed, old: Evidence, *, looks: int = 1,
                   origin: str | None = None, spread: bool = False) -> Candidate | None:
    """Re-check, on the current head, a candidate whose evidence was gathered on an older one or that gets another
    look: only the tasks that carried its effect and those the commits in between changed are scored again
    (`Gate.reverify`; on an unchanged head those scores are cached), then new tasks while the verdict is open.
    Without usable old evidence, or when a commit in between has none (a revert), the candidate is evaluated
    afresh."""
    diff, base = proposed.diff, proposed.snapshot
    changed = None if old.base_version is None or not old.rows else \
        touched(engine, diff.artifact_id, old.base_version, base.version)
    if changed is None:
        return await engine.evaluate(proposed)
    texts = (base.text, apply(diff, base.text))
    evidence = await engine.gate.reverify(diff.id, texts, base.version, old, changed,
                                          delta=engine.look_delta(base.version, looks),
                                          windowed=engine.policy.windowed, looks=looks, origin=origin,
                                          spread=spread)
    engine.journal.counts["reverified"] += 1
    return Candidate(diff, evidence, looks=looks, origin=origin, shows_origin=engine.shows_origin(diff, origin))


def touched(engine: Engine, artifact_id: str, after: int, upto: int) -> frozenset[str] | None:
    """The validation tasks whose score the commits of versions `after`+1 .. `upto` changed, by their own
    evidence; None if one of them carries none (then nothing can be assumed). Remembered per version."""
    tasks: set[str] = set()
    for number in range(after + 1, upto + 1):
        if number not in engine.touched:
            diff_id = engine.store.version(artifact_id, number).diff_id
            rows = engine.store.evidence(diff_id).rows if diff_id is not None else ()
            engine.touched[number] = frozenset(r.task_id for r in rows if r.base != r.candidate) if rows else None
        changed = engine.touched[number]
        if changed is None:
            return None
        tasks |= changed
    return frozenset(tasks)


def follow_ups(engine: Engine, result: StepResult, candidates: Sequence[Candidate]) -> list[tuple[Candidate, Outcome]]:
    """The work a step sends back: held candidates (with the outcome that held them; those held to replicate are
    parked until the head moves, and the parked ones a new head can replicate on are released) and, under the
    REPAIR policy, the candidates the step found STALE (`recheck` repairs them)."""
    work: list[tuple[Candidate, Outcome]] = []
    for candidate in result.held:
        outcome = result.decision_for(candidate.diff.id).outcome
        if outcome is Outcome.EXTEND and candidate.replicate:
            engine.parking.park(candidate)
        else:
            work.append((candidate, outcome))
    last = {d.diff_id: d.outcome for d in result.decisions}
    engine.parking.offer([c.diff for c in candidates if last.get(c.diff.id) is Outcome.REJECTED])
    work += closing_looks(engine) if calls_spent(engine) else release_parked(engine)
    work += [(c, Outcome.STALE) for c in candidates
             if last.get(c.diff.id) is Outcome.STALE and can_repair(engine, c.diff)]
    return work


def calls_spent(engine: Engine) -> bool:
    """True once fewer calls are left under `Budget.calls` (calls in flight counted as spent) than the two a fresh
    context for a candidate held to replicate costs."""
    return engine.accounts.meter.remaining("calls") < 2


def release_parked(engine: Engine, *, winding_down: bool = False) -> list[tuple[Candidate, Outcome]]:
    """The parked candidates that can replicate now (on the head, or the head with a sibling's change), as work
    for the gate. Besides each step, a loop with nothing else to do asks for them (`winding_down`: from then
    on, earlier versions may serve as last-resort contexts, `runtime.parking`): a run that stops while one waits
    leaves calls unused and a change undecided."""
    parking = engine.parking
    parking.winding_down = parking.winding_down or winding_down

    def earlier() -> list[Earlier]:
        history = engine.store.history(engine.artifact.id)
        plain = [Earlier(v.number, v.text) for v in reversed(history[:-1][-EARLIER:])]
        return [*without_commits(engine, history, EARLIER), *plain]
    head_with = HeadWith(engine.head.text)

    def fresh(candidate: Candidate, sibling: Context | None) -> bool:
        return is_fresh(engine, candidate, sibling, head_with)
    released = parking.release(fresh, earlier, partial(keeps_whole, head_with), combined, _triage(engine))
    return [(c, Outcome.EXTEND) for c in released]


def closing_looks(engine: Engine) -> list[tuple[Candidate, Outcome]]:
    """The candidates stranded while the run winds down (no fresh context left, `runtime.parking`), as work for
    their closing look (`Candidate.closing`: the replication design ends at the contexts they have, `optim.judge`).
    For a loop with nothing else in flight that could still make a new head; or once the calls are spent (no
    context can be paid for): then every candidate waiting with enough contexts to pass (`Parking.close`)."""
    final = calls_spent(engine)
    closing = engine.parking.close(final) if engine.parking.winding_down or final else []
    engine.journal.counts["closing_looks"] += len(closing)
    return [(c, Outcome.EXTEND) for c in closing]


def _triage(engine: Engine) -> Callable[[list[Candidate]], tuple[list[Candidate], list[Candidate]]] | None:
    """`runtime.split.triage` under `Budget.calls` (None when calls are not limited), on the calls left less what the
    candidates already out for a context may still need, each candidate's nearness to a pass judged at its next
    look's level, shared as the acceptance stage shares it over failed replications, and the run's noise."""
    meter = engine.accounts.meter
    if meter.budget.calls is None:
        return None
    afford = meter.remaining("calls") - replication_reserve((), out=engine.parking.out_for_replication(engine.open))

    def need(candidate: Candidate) -> int | None:
        delta = engine.look_delta(engine.head.version, candidate.looks)
        delta /= 1 + engine.aggregator.replication_tried(candidate.evidence)  # the level as the test will spend it
        return contexts_to_pass(candidate.evidence, delta=delta, noise=engine.noise)
    return partial(triage, afford=afford, need=need)
