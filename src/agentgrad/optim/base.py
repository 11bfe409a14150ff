"""The optimizer's vocabulary: candidates in a batch, the context a step sees, and the `Stage` protocol.

A stage is a set of pure functions, optax-style: `init() -> state`, `update(batch, state, ctx) -> (batch, state)`
and `observe(decisions, state, ctx) -> state` (what it learns from the final verdicts of a step, e.g. tabu learns
rejects). Stages do no I/O and read no clock: the time is `ctx.now`, handed in by the runtime.
Every state has `to_dict()`; the stage's `load` turns that dict back into a state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Generic, Protocol, TypeVar

from agentgrad.core.artifact import Kind, Layer
from agentgrad.core.decision import Decision, Outcome
from agentgrad.core.diff import Diff, fingerprint
from agentgrad.core.evidence import Evidence
from agentgrad.errors import UnknownArtifactError, UnknownVersionError
from agentgrad.optim.noise import NoiseEstimate


@dataclass(frozen=True)
class Head:
    """The current committed state of one artifact, as the optimizer sees it.

    `changes` is for a packed library's head: for recent versions, the members each one changed (a version not
    listed is unknown). Staleness counts only the versions that changed a member a diff edits (`optim.staleness`).
    """

    version: int
    text: str
    layer: Layer = Layer.L2
    kind: Kind = Kind.SKILL
    changes: Mapping[int, frozenset[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "changes", MappingProxyType(dict(self.changes)))


@dataclass(frozen=True)
class Context:
    """What a step may read: the heads of the artifacts, the time, (optionally) the known task ids, and the run's
    answer-noise estimate (`optim.noise`; None: no estimate, so acceptance uses the sign test alone)."""

    heads: Mapping[str, Head]
    now: float = 0.0
    known_tasks: frozenset[str] | None = None
    noise: NoiseEstimate | None = None


@dataclass(frozen=True)
class Candidate:
    """A diff with its evidence on its way through the stages.

    `recheck` is set when a stale diff was rebased: its evidence was measured on an older head. `parts` lists the
    diffs a fused candidate was made of. `looks` counts the evidence's looks: 1 for a first evaluation, one more
    each time the acceptance stage held it for more tasks (`Outcome.EXTEND`); each look is tested at its own share
    of δ (`optim.acceptance.look_delta`). `origin` is the task the proposal was written for (None if unknown).
    `replicate` is set on a candidate held to have its origin task scored again on later heads (the replication
    test, `optim.judge`) instead of on more tasks. `shows_origin` is set when the change holds its origin task's
    input and gold answer (a worked example of that very task, `runtime.shown`): a win there is no evidence, so it
    is never held for the replication test. `closing` is set on one held to replicate when the run has no fresh
    context left for it: its next look is its last, the test's design ending at the contexts it has (`optim.judge`).
    """

    diff: Diff
    evidence: Evidence
    recheck: bool = False
    parts: tuple[Diff, ...] = ()
    looks: int = 1
    origin: str | None = None
    replicate: bool = False
    shows_origin: bool = False
    closing: bool = False


def head_of_diff(diff: Diff, ctx: Context, *, stage: str = "") -> Head:
    """The head `diff` edits; `UnknownArtifactError` or `UnknownVersionError` (naming `stage`) if it cannot be."""
    where = f"{stage}: " if stage else ""
    head = ctx.heads.get(diff.artifact_id)
    if head is None:
        raise UnknownArtifactError(f"{where}diff {diff.id} edits unknown artifact {diff.artifact_id!r}")
    if diff.base_version > head.version:
        raise UnknownVersionError(f"{where}diff {diff.id} is based on version {diff.base_version} of "
                                  f"{diff.artifact_id!r}, but the head is version {head.version}")
    return head


def verdict(candidate: Candidate, outcome: Outcome, stage: str, reason: str,
            numbers: Mapping[str, float] | None = None) -> Decision:
    """A `Decision` on `candidate`, filling in its ids, fingerprint and parts."""
    return Decision(candidate.diff.id, candidate.diff.artifact_id, outcome, stage, reason, dict(numbers or {}),
                    fingerprint(candidate.diff), tuple(p.id for p in candidate.parts))


@dataclass(frozen=True)
class Batch:
    """The diffs still in play (`candidates`), the verdicts so far, and the diffs sent back for more evidence."""

    candidates: tuple[Candidate, ...] = ()
    decisions: tuple[Decision, ...] = ()
    held: tuple[Candidate, ...] = ()

    def settle(self, verdicts: Mapping[str, tuple[Candidate, Decision]],
               keep: Sequence[Candidate] | None = None) -> Batch:
        """Remove the candidates with verdicts (keyed by diff id), record the verdicts, hold non-final ones.

        `keep`, if given, replaces the surviving candidates (e.g. with rebased or fused ones).
        """
        survivors = tuple(keep) if keep is not None else tuple(
            c for c in self.candidates if c.diff.id not in verdicts)
        held = tuple(c for c, d in verdicts.values() if not d.outcome.final)
        return Batch(survivors, self.decisions + tuple(d for _, d in verdicts.values()), self.held + held)


class StageState(Protocol):
    """A stage's state: an immutable value that can be written as a JSON-ready dict."""

    def to_dict(self) -> dict[str, Any]: ...


S = TypeVar("S", bound=StageState)


def _keep_state(decisions: Sequence[Decision], state: S, ctx: Context) -> S:
    return state


@dataclass(frozen=True)
class Stage(Generic[S]):
    """One optimizer transform: pure functions over an immutable state."""

    name: str
    init: Callable[[], S]
    update: Callable[[Batch, S, Context], tuple[Batch, S]]
    load: Callable[[Mapping[str, Any]], S]
    observe: Callable[[Sequence[Decision], S, Context], S] = field(default=_keep_state)


@dataclass(frozen=True)
class EmptyState:
    """The state of a stage that keeps none."""

    def to_dict(self) -> dict[str, Any]:
        return {}

    @classmethod
    def load(cls, data: Mapping[str, Any]) -> EmptyState:
        return cls()


def stateless(name: str, update: Callable[[Batch, Context], Batch]) -> Stage[EmptyState]:
    """A stage that keeps no state, from a pure `update(batch, ctx) -> batch`."""
    return Stage(name, EmptyState, lambda batch, state, ctx: (update(batch, ctx), state), EmptyState.load)
