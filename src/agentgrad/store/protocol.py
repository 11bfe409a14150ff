"""The store port: what the optimizer's commit path and the runtime need from a versioned library."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from agentgrad.core.artifact import Artifact, Version
from agentgrad.core.decision import Decision
from agentgrad.core.diff import Diff
from agentgrad.core.evidence import Evidence


class Store(Protocol):
    """A transactional, versioned artifact library (`SQLiteStore` is the embedded default)."""

    def add_artifact(self, artifact: Artifact) -> Version: ...

    def artifact(self, artifact_id: str, branch: str = "dev") -> Artifact: ...

    def heads(self, branch: str = "dev") -> dict[str, Version]: ...

    def commit_many(self, items: Sequence[tuple[Diff, Evidence, Decision]]) -> list[Version]: ...

    def record(self, diff: Diff, evidence: Evidence, decision: Decision) -> None: ...

    def decisions(self, *, diff_id: str | None = None, artifact_id: str | None = None,
                  outcome: str | None = None) -> list[Decision]: ...
