"""The commit path: the one place where an optimizer step's verdicts are written to the store."""

from __future__ import annotations

from collections.abc import Iterable

from agentgrad.core.artifact import Version
from agentgrad.core.decision import Decision, Outcome
from agentgrad.core.diff import Diff
from agentgrad.core.evidence import Evidence
from agentgrad.optim.aggregator import StepResult
from agentgrad.optim.base import Candidate
from agentgrad.store.protocol import Store


def _find(candidates: Iterable[Candidate], diff_id: str) -> Candidate | None:
    for candidate in candidates:
        if candidate.diff.id == diff_id:
            return candidate
        for part in candidate.parts:
            if part.id == diff_id:
                return Candidate(part, candidate.evidence)
    return None


def commit_step(store: Store, result: StepResult, submitted: Iterable[Candidate]) -> list[Version]:
    """Write one step: the accepted diffs as new versions (one transaction), then every final verdict.

    `submitted` are the candidates given to the step (their diffs and evidence are recorded with the verdicts
    on them, so "why was this kept or not" can always be answered). Non-final verdicts (recheck, full check,
    deferred) are not recorded: the diff comes back with new evidence.
    """
    pool = list(submitted) + list(result.accepted) + list(result.held)
    accepted: list[tuple[Diff, Evidence, Decision]] = []
    for candidate in result.accepted:
        accepted.append((candidate.diff, candidate.evidence, result.decision_for(candidate.diff.id)))
    versions = store.commit_many(accepted) if accepted else []
    for decision in result.decisions:
        if decision.outcome is Outcome.ACCEPTED or not decision.outcome.final:
            continue
        found = _find(pool, decision.diff_id)
        if found is None:
            raise RuntimeError(f"step decided on diff {decision.diff_id} that was never submitted")
        store.record(found.diff, found.evidence, decision)
    return versions
