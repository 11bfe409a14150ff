"""Row <-> value conversion for the SQLite store: diffs, evidence and decisions as JSON or plain columns."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from agentgrad.core.decision import Decision, Outcome
from agentgrad.core.diff import Diff
from agentgrad.core.evidence import Evidence, Row
from agentgrad.errors import InvalidIdError, InvalidOpError


def to_json(value: object) -> str:
    """Canonical JSON text (sorted keys, no spaces) for a JSON-ready value."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def diff_json(diff: Diff) -> str:
    """The stored form of a diff: `Diff.to_dict()` as canonical JSON."""
    return to_json(diff.to_dict())


def diff_from_json(body: str) -> Diff:
    """The diff stored as `body`."""
    return Diff.from_dict(json.loads(body))


def is_rebase_of(new: Diff, old: Diff) -> bool:
    """True if `new` is `old` moved to a newer head by `rebase` (same id and intent, later base)."""
    return (new.id == old.id and new.artifact_id == old.artifact_id and new.author == old.author
            and new.rationale == old.rationale and new.breaks_contract == old.breaks_contract
            and new.base_version > old.base_version)


def evidence_summary(diff_id: str, evidence: Evidence) -> tuple[Any, ...]:
    """The per-diff evidence row: (diff_id, base_version, full, cost, tokens, traces JSON, n_rows). The traces
    column holds the list of traces, or, when the evidence marks focus or far tasks, an object with all of them."""
    traces: Any = list(evidence.traces)
    if evidence.focus or evidence.far or evidence.calibrated or evidence.replicas:
        traces = {"traces": traces, "focus": list(evidence.focus), "far": list(evidence.far),
                  "calibrated": evidence.calibrated, "replicas": list(evidence.replicas)}
    return (diff_id, evidence.base_version, int(evidence.full), float(evidence.cost), int(evidence.tokens),
            to_json(traces), len(evidence.rows))


def evidence_rows(diff_id: str, evidence: Evidence) -> Iterator[tuple[str, int, str, float, float]]:
    """One (diff_id, idx, task_id, base, candidate) tuple per evidence row, in order."""
    for index, row in enumerate(evidence.rows):
        yield diff_id, index, row.task_id, float(row.base), float(row.candidate)


def evidence_from_rows(summary: Sequence[Any], rows: Sequence[Sequence[Any]]) -> Evidence:
    """Rebuild evidence from its summary (base_version, full, cost, tokens, traces) and (task, base, cand) rows."""
    base_version, full, cost, tokens, traces = summary
    body = json.loads(traces)
    marks: Mapping[str, Any] = body if isinstance(body, Mapping) else {"traces": body}
    return Evidence(tuple(Row(t, b, c) for t, b, c in rows), base_version, bool(full), cost, tokens,
                    tuple(marks.get("traces", ())), tuple(marks.get("focus", ())), tuple(marks.get("far", ())),
                    bool(marks.get("calibrated", False)), tuple(marks.get("replicas", ())))


def _plain_number(value: Any, name: str) -> int | float:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    try:
        return float(value)
    except (TypeError, ValueError) as exc:
        raise InvalidOpError(f"decision number {name!r} must be a number, got {type(value).__name__}") from exc


def decision_params(decision: Decision, created: float) -> tuple[Any, ...]:
    """The column values of a decision row (everything but its seq)."""
    numbers = {str(k): _plain_number(v, str(k)) for k, v in decision.numbers.items()}
    return (decision.diff_id, decision.artifact_id, Outcome(decision.outcome).value, decision.stage,
            decision.reason, to_json(numbers), decision.fingerprint, to_json(list(decision.parts)), created)


DECISION_COLUMNS = "diff_id, artifact_id, outcome, stage, reason, numbers, fingerprint, parts"


def decision_from_row(row: Sequence[Any]) -> Decision:
    """A decision from the columns in `DECISION_COLUMNS` order."""
    diff_id, artifact_id, outcome, stage, reason, numbers, fp, parts = row
    return Decision(diff_id, artifact_id, Outcome(outcome), stage, reason, json.loads(numbers), fp,
                    tuple(json.loads(parts)))


def check_pair(diff: Diff, decision: Decision) -> None:
    """Raise `InvalidIdError` unless `decision` is about `diff` (same diff id and artifact id)."""
    if decision.diff_id != diff.id or decision.artifact_id != diff.artifact_id:
        raise InvalidIdError(
            f"decision is about diff {decision.diff_id!r} of {decision.artifact_id!r}, "
            f"but the diff is {diff.id!r} of {diff.artifact_id!r}")


def check_commit(diff: Diff, decision: Decision) -> None:
    """`check_pair`, and `InvalidOpError` unless the decision is the acceptance a commit needs."""
    check_pair(diff, decision)
    if Outcome(decision.outcome) is not Outcome.ACCEPTED:
        raise InvalidOpError(f"commit needs an accepted decision on diff {diff.id!r}, got {decision.outcome}; "
                             "store other verdicts with record()")


def summarise(evidence: Evidence) -> dict[str, Any]:
    """A short, JSON-ready account of some evidence, for `why`."""
    wins, losses = evidence.wins_losses()
    return {"tasks": len(evidence.rows), "mean_delta": evidence.mean_delta(), "wins": wins, "losses": losses,
            "base_version": evidence.base_version, "full": evidence.full, "cost": evidence.cost,
            "tokens": evidence.tokens, "traces": list(evidence.traces)}


def state_json(state: Mapping[str, int]) -> str:
    """A branch state {artifact_id: version number} as canonical JSON."""
    return to_json(dict(state))
