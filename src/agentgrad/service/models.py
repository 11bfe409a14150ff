"""The API's request and response bodies (Pydantic), and the bounds every parameter is checked against."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import Path, Query
from pydantic import BaseModel, ConfigDict, Field

from agentgrad.core.decision import Outcome

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)*$"
SEGMENT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
JOB_PATTERN = r"^r[0-9a-f]{12}$"
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9 ._-]*$"
MAX_LIMIT = 500
MAX_CONFIG = 200_000

JobId = Annotated[str, Path(pattern=JOB_PATTERN, min_length=13, max_length=13, description="A job (run) id.")]
DiffId = Annotated[str, Path(pattern=SEGMENT_PATTERN, min_length=1, max_length=200, description="A diff id.")]
ArtifactQuery = Annotated[str, Query(pattern=ID_PATTERN, min_length=1, max_length=200, description="An artifact id.")]
OptionalArtifact = Annotated[str | None, Query(pattern=ID_PATTERN, min_length=1, max_length=200,
                                               description="Only this artifact.")]
Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description=f"At most this many items (1-{MAX_LIMIT}).")]
Offset = Annotated[int, Query(ge=0, le=10_000_000, description="Skip this many items.")]
OutcomeQuery = Annotated[Outcome | None, Query(description="Only decisions with this outcome.")]
Branch = Annotated[Literal["dev", "stable"], Query(description="The branch.")]

STRICT = ConfigDict(extra="forbid")


class ErrorDetail(BaseModel):
    type: str
    message: str
    details: list[dict[str, Any]] | None = None


class ErrorBody(BaseModel):
    """Every error: ``{"error": {"type": ..., "message": ...}}``."""

    error: ErrorDetail


class StartRun(BaseModel):
    """A run to start: a configuration file's text, as `agentgrad run` takes it."""

    model_config = STRICT
    config: str = Field(min_length=1, max_length=MAX_CONFIG, description="The configuration (TOML or YAML text).")
    format: Literal["toml", "yaml"] = "toml"
    name: str = Field("run", min_length=1, max_length=100, pattern=NAME_PATTERN, description="A label for the run.")


class PromoteRequest(BaseModel):
    model_config = STRICT
    artifacts: list[Annotated[str, Field(min_length=1, max_length=200, pattern=ID_PATTERN)]] | None = Field(
        None, max_length=1000, description="The artifacts to promote (default: all).")


class JobOut(BaseModel):
    id: str
    name: str
    owner: str
    state: str
    pid: int | None
    restarts: int
    error: str | None
    created: float
    updated: float


class JobPage(BaseModel):
    items: list[JobOut]
    total: int
    limit: int
    offset: int


class RunOut(BaseModel):
    """A job and its run's status (`agentgrad status --json`)."""

    job: JobOut
    status: dict[str, Any] | None


class ArtifactOut(BaseModel):
    id: str
    kind: str
    layer: str | None
    dev: int
    stable: int


class ArtifactList(BaseModel):
    items: list[ArtifactOut]


class VersionOut(BaseModel):
    number: int
    diff_id: str | None
    hash: str
    text: str | None


class Page(BaseModel):
    total: int
    limit: int
    offset: int


class VersionPage(Page):
    items: list[VersionOut]


class DiffSummary(BaseModel):
    id: str
    artifact_id: str
    outcome: str
    decisions: int


class DiffPage(Page):
    items: list[DiffSummary]


class DiffView(BaseModel):
    diff: dict[str, Any]
    version: int | None
    outcome: str | None
    unified: str
    note: str | None


class DecisionPage(Page):
    items: list[dict[str, Any]]


class FrontierOut(BaseModel):
    """An example only changes not committed won: those changes (the most rows won first) and the rows won."""

    task_id: str
    diff_ids: list[str]
    wins: int


class FrontierList(BaseModel):
    items: list[FrontierOut]


class Why(BaseModel):
    diff: dict[str, Any]
    evidence: dict[str, Any]
    decisions: list[dict[str, Any]]
    version: int | None


class Usage(BaseModel):
    budget: dict[str, dict[str, float | None]]
    stages: dict[str, dict[str, int]]
    throughput: dict[str, float | int | None]
    verdicts: dict[str, int]
    commits: int
    seq: int


class RewardPoint(BaseModel):
    version: int
    t: float
    rollouts: int
    reward: float


class Rewards(BaseModel):
    validation: list[RewardPoint]
    held_out: list[RewardPoint]


class Promoted(BaseModel):
    promoted: dict[str, int]
    before: dict[str, int]


class ExportedFile(BaseModel):
    version: int
    text: str


class Export(BaseModel):
    branch: str
    files: dict[str, ExportedFile]
