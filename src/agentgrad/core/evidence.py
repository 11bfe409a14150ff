"""The evidence a diff carries: per-example scores of base and candidate on named tasks, costs and traces."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from agentgrad.core._checks import is_integer, is_number, items, number, text
from agentgrad.errors import InvalidEvidenceError


@dataclass(frozen=True)
class Row:
    """One paired observation: the base's and the candidate's score on one task, both in [0, 1]."""

    task_id: str
    base: float
    candidate: float

    @property
    def delta(self) -> float:
        """Candidate minus base, in [-1, 1]."""
        return self.candidate - self.base


def _check_score(value: object, task_id: str, side: str) -> float:
    return number(value, f"task {task_id!r}: {side} score", low=0.0, high=1.0, error=InvalidEvidenceError)


REPLICA_MARK = "@"  # a replica row's id: the origin task, this mark, then the name of its context


def replica_origin(row_id: str) -> str:
    """The origin task of a replica row's id (``<origin>@<context>``)."""
    return row_id.rsplit(REPLICA_MARK, 1)[0]


def replica_context(row_id: str) -> str:
    """The context's name in a replica row's id (``<origin>@<context>``)."""
    return row_id.rsplit(REPLICA_MARK, 1)[1]


@dataclass(frozen=True)
class Evidence:
    """Paired per-example scores, plus what it cost to get them.

    Args:
        rows: one `Row` per task, task ids unique.
        base_version: the artifact version the base scores were measured on (None if unknown).
        full: True when the rows cover the whole validation split (L1 changes need this).
        cost: money spent evaluating, in the run's currency unit.
        tokens: tokens spent evaluating.
        traces: short excerpts of the runs, for people reading a decision.
        focus: the rows' tasks the gate chose for looking most like the candidate's origin task (where its effect
            should show); the acceptance test looks for the gain there (`optim.judge`).
        far: the rows' tasks least like the origin task; their differences estimate the answer noise.
        calibrated: the gate planned the gain test as the noise-calibrated one (`optim.judge`), not the sign test.
        replicas: the rows that score the candidate's origin task again on later heads (fresh contexts, ids
            ``<origin>@<context>``, `replica_origin`); when there are any, the acceptance test is the replication test
            (`optim.judge`).
    """

    rows: tuple[Row, ...]
    base_version: int | None = None
    full: bool = False
    cost: float = 0.0
    tokens: int = 0
    traces: tuple[str, ...] = ()
    focus: tuple[str, ...] = ()
    far: tuple[str, ...] = ()
    calibrated: bool = False
    replicas: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        rows = items(self.rows, "evidence rows", Row, error=InvalidEvidenceError)
        seen: set[str] = set()
        for row in rows:
            text(row.task_id, "evidence task id", error=InvalidEvidenceError)
            if row.task_id in seen:
                raise InvalidEvidenceError(f"task {row.task_id!r} appears twice in one evidence")
            seen.add(row.task_id)
            _check_score(row.base, row.task_id, "base")
            _check_score(row.candidate, row.task_id, "candidate")
        if not (is_number(self.cost, low=0) and is_number(self.tokens, low=0)):
            raise InvalidEvidenceError(f"cost and tokens must be finite and >= 0, got {self.cost!r}, {self.tokens!r}")
        if self.base_version is not None and not is_integer(self.base_version, low=0):
            raise InvalidEvidenceError(f"evidence base_version must be None or an int >= 0, got {self.base_version!r}")
        object.__setattr__(self, "rows", rows)
        object.__setattr__(self, "traces", tuple(self.traces))
        for name in ("focus", "far", "replicas"):
            marked = tuple(getattr(self, name))
            if any(t not in seen for t in marked):
                raise InvalidEvidenceError(f"evidence marks {name} tasks it has no row for: "
                                           f"{[t for t in marked if t not in seen][:3]}")
            object.__setattr__(self, name, marked)

    @classmethod
    def paired(cls, base: Mapping[str, float], candidate: Mapping[str, float], **kwargs: Any) -> Evidence:
        """Evidence from two score maps over the same task ids (a clear error if the ids differ)."""
        if set(base) != set(candidate):
            missing = sorted(set(base) ^ set(candidate))[:5]
            raise InvalidEvidenceError(f"base and candidate were scored on different tasks, e.g. {missing}")
        rows = tuple(Row(t, _check_score(base[t], t, "base"), _check_score(candidate[t], t, "candidate"))
                     for t in sorted(base))
        return cls(rows, **kwargs)

    @property
    def task_ids(self) -> tuple[str, ...]:
        """The tasks this evidence covers, in row order."""
        return tuple(r.task_id for r in self.rows)

    def deltas(self) -> dict[str, float]:
        """Candidate minus base per task."""
        return {r.task_id: r.delta for r in self.rows}

    def mean_delta(self) -> float:
        """Mean per-example improvement (0.0 for no rows)."""
        return sum(r.delta for r in self.rows) / len(self.rows) if self.rows else 0.0

    def wins_losses(self) -> tuple[float, float]:
        """Fractional wins and losses: the sums of the positive and of the negative parts of the deltas."""
        wins = sum(max(r.delta, 0.0) for r in self.rows)
        losses = sum(max(-r.delta, 0.0) for r in self.rows)
        return wins, losses

    def replica_rows(self) -> tuple[Row, ...]:
        """The rows that score the origin task again in fresh contexts (`replicas`), in row order."""
        marked = set(self.replicas)
        return tuple(r for r in self.rows if r.task_id in marked)

    def restricted(self, task_ids: Collection[str]) -> Evidence:
        """The same evidence on the given tasks only."""
        keep = set(task_ids)
        return Evidence(tuple(r for r in self.rows if r.task_id in keep), self.base_version, False, self.cost,
                        self.tokens, self.traces, tuple(t for t in self.focus if t in keep),
                        tuple(t for t in self.far if t in keep), self.calibrated,
                        tuple(t for t in self.replicas if t in keep))

    def check_tasks(self, known: Collection[str]) -> None:
        """Raise `InvalidEvidenceError` naming any task id not in `known`."""
        unknown = [r.task_id for r in self.rows if r.task_id not in known]
        if unknown:
            raise InvalidEvidenceError(f"evidence names {len(unknown)} unknown task id(s), e.g. {unknown[:3]}")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; `Evidence.from_dict` reverses it."""
        return {"rows": [[r.task_id, r.base, r.candidate] for r in self.rows], "base_version": self.base_version,
                "full": self.full, "cost": self.cost, "tokens": self.tokens, "traces": list(self.traces),
                "focus": list(self.focus), "far": list(self.far), "calibrated": self.calibrated,
                "replicas": list(self.replicas)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Evidence:
        """Build evidence from `to_dict` output, validating every score."""
        try:
            rows = tuple(Row(str(t), b, c) for t, b, c in data["rows"])
            return cls(rows, data.get("base_version"), bool(data.get("full", False)), float(data.get("cost", 0.0)),
                       int(data.get("tokens", 0)), tuple(data.get("traces", ())),
                       tuple(str(t) for t in data.get("focus", ())), tuple(str(t) for t in data.get("far", ())),
                       bool(data.get("calibrated", False)), tuple(str(t) for t in data.get("replicas", ())))
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, InvalidEvidenceError):
                raise
            raise InvalidEvidenceError(f"malformed evidence dict: {exc!r}") from exc


def concatenate(parts: Iterable[tuple[str, Evidence]]) -> Evidence:
    """Evidence of a fused diff: each part's rows kept as separate observations, ids prefixed with the part. The
    union is judged by the replication test only when every part was (else its replica rows are plain rows)."""
    rows: list[Row] = []
    cost, tokens, full = 0.0, 0, True
    traces: list[str] = []
    marks: dict[str, list[str]] = {"focus": [], "far": [], "replicas": []}
    calibrated = replicated = True
    versions = set()
    for label, evidence in parts:
        rows.extend(Row(f"{label}:{r.task_id}", r.base, r.candidate) for r in evidence.rows)
        for name, marked in marks.items():
            marked.extend(f"{label}:{t}" for t in getattr(evidence, name))
        calibrated, replicated = calibrated and evidence.calibrated, replicated and bool(evidence.replicas)
        cost, tokens = cost + evidence.cost, tokens + evidence.tokens
        traces.extend(evidence.traces)
        full = full and evidence.full
        versions.add(evidence.base_version)
    version = versions.pop() if len(versions) == 1 else None
    return Evidence(tuple(rows), version, full and bool(rows), cost, tokens, tuple(traces), tuple(marks["focus"]),
                    tuple(marks["far"]), calibrated and bool(rows), tuple(marks["replicas"]) if replicated else ())
