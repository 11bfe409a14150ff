"""The store port: what the optimizer's commit path, the runtime and the CLI need from a versioned library.

`SQLiteStore` is the embedded backend; any other (a Postgres one, say) must keep the same promises, which the
conformance suite in ``tests/store/conformance.py`` checks. The promises, in short:

- Versions. Every artifact starts at version 0 (its initial text) on both branches, ``"dev"`` and ``"stable"``
  (no other branch exists: any other name raises `InvalidIdError`). Each commit adds version ``head + 1`` on dev;
  no version is ever changed or deleted.
- Compare-and-swap. A commit names the dev head it was made against (``Diff.base_version``, or `expected`); if
  the head is elsewhere the commit raises `StaleHeadError`. A batch (`commit_many`) checks the swap on every
  head it touches, in order, inside one transaction.
- All or nothing. A write that raises has written nothing: no version, head move, diff, evidence or decision.
  Readers never see half of a batch: `heads` is one consistent snapshot.
- Frozen layer. An L0 artifact (`Layer.L0`, `Artifact.frozen`) is never changed: a commit to it raises
  `FrozenLayerError`. Verdicts on diffs of it can still be recorded.
- Concurrency. Writers in threads (sharing one store or each opening their own) and in separate processes
  (each opening its own store on the same place) serialise: none loses or duplicates another's commit.
- Verdicts. Every decision is kept, in order, queryable by diff, artifact and outcome; `why` tells a diff's
  story. Accepted decisions come only with commits, other final verdicts only with `record`.
- One unit of work. `transaction` groups store writes and `journal` events: all commit together or none does.
- Durability. Whatever a write returned for is there when the store is opened again.
- Damage. A store whose storage is damaged, or is not a store at all, raises one of agentgrad's typed errors
  (an `AgentgradError`) when it is opened or read, never a driver's own exception.

Errors are those of `agentgrad.errors`: `UnknownArtifactError` / `UnknownVersionError` for what is not there
(an unknown diff id counts as an unknown version), `InvalidIdError` for a bad or clashing id, `InvalidOpError`
for a malformed request, `ApplyConflictError` for ops that do not apply to the head text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, TypeVar, runtime_checkable

from agentgrad.core.artifact import Artifact, Version
from agentgrad.core.decision import Decision, Outcome, Standing
from agentgrad.core.diff import Diff
from agentgrad.core.evidence import Evidence
from agentgrad.store.events import Event

_S = TypeVar("_S", bound="Store")


@runtime_checkable
class Journal(Protocol):
    """The run's event log and named documents, written in the store's transactions (`Store.transaction`)."""

    def append(self, kind: str, payload: Mapping[str, Any], *, defer: bool = False) -> int:
        """Append one event (with the enclosing transaction, if any); with `defer`, hold it until the next write."""
        ...

    def append_many(self, events: Iterable[tuple[str, Mapping[str, Any]]]) -> int:
        """Append several events, all or none; the last sequence number."""
        ...

    def flush(self) -> None:
        """Write the deferred events."""
        ...

    def read(self, kinds: Sequence[str] | None = None, *, after: int = 0) -> list[Event]:
        """Events after sequence number `after` (optionally of the given kinds), in order."""
        ...

    def last_seq(self) -> int:
        """The newest event's sequence number (0 when there is none)."""
        ...

    def count(self, kind: str) -> int:
        """How many events of `kind` there are."""
        ...

    def put(self, key: str, value: Any) -> None:
        """Store a named JSON document, replacing an older one."""
        ...

    def get(self, key: str) -> Any:
        """A named JSON document, or None."""
        ...


@runtime_checkable
class Store(Protocol):
    """A transactional, versioned artifact library (`SQLiteStore` is the embedded default).

    ``isinstance(x, Store)`` only checks that every member exists; the conformance suite checks the promises.
    """

    @property
    def run_dir(self) -> Path:
        """The run directory this store belongs to (the run's event log and files live there)."""
        ...

    # -- lifetime ---------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Finish pending background work (e.g. mirroring) and release the connection; the store is unusable after."""
        ...

    def __enter__(self: _S) -> _S:
        """The store itself, closed when the block ends."""
        ...

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        """`close()`."""
        ...

    # -- one unit of work -------------------------------------------------------------------------------------

    @property
    def journal(self) -> Journal:
        """The run's event log, on the store's own transactions."""
        ...

    def transaction(self) -> AbstractContextManager[object]:
        """One unit of work: every write of the store and of its `journal` inside the block commits when it ends,
        or, if it raises, none does; a write (or a `transaction`) inside joins it, and a failed inner write undoes
        only itself. Other openers see nothing of it before the end. An optimizer step writes its commits,
        verdicts, events and checkpoint in one."""
        ...

    # -- artifacts and versions -------------------------------------------------------------------------------

    def add_artifact(self, artifact: Artifact) -> Version:
        """Add `artifact` as version 0 on both branches; a no-op returning version 0 if it is already there.

        Its layer is the artifact's (default from its kind). Raises `InvalidIdError` if the id exists with other
        kind, layer or text.
        """
        ...

    def artifact_ids(self) -> list[str]:
        """Every artifact id, sorted."""
        ...

    def artifact(self, artifact_id: str, branch: str = "dev") -> Artifact:
        """The artifact (kind and layer as added) with its text at the head of `branch`."""
        ...

    def head(self, artifact_id: str, branch: str = "dev") -> Version:
        """The version at the head of `branch` (`UnknownArtifactError` for an unknown artifact)."""
        ...

    def heads(self, branch: str = "dev") -> dict[str, Version]:
        """The head version of every artifact on `branch`, by artifact id, read as one consistent snapshot."""
        ...

    def version(self, artifact_id: str, number: int) -> Version:
        """Version `number` of an artifact (`UnknownVersionError` if it has none such)."""
        ...

    def history(self, artifact_id: str) -> list[Version]:
        """Every version of an artifact, oldest first: numbers 0, 1, 2, ... with no gap."""
        ...

    # -- writes -----------------------------------------------------------------------------------------------

    def commit(self, diff: Diff, evidence: Evidence, decision: Decision, *, expected: int | None = None) -> Version:
        """Apply `diff` to the dev head and make the result the new dev head, storing its evidence and decision.

        `decision` must be the ACCEPTED decision about `diff` (else `InvalidOpError`; about another diff,
        `InvalidIdError`). Compare-and-swap: the dev head must be at `expected` (default `diff.base_version`),
        else `StaleHeadError`. L0 artifacts raise `FrozenLayerError`; ops that do not apply raise
        `ApplyConflictError`; a diff id already committed raises `InvalidIdError`. Any error writes nothing.
        """
        ...

    def commit_many(self, items: Sequence[tuple[Diff, Evidence, Decision]]) -> list[Version]:
        """`commit` each item in order in one transaction: every item is committed, or (on any error) none is.

        The swap is checked on every head the batch touches, each diff against the head the items before it
        left (so a batch may chain diffs of one artifact). Returns the new versions in item order.
        """
        ...

    def record(self, diff: Diff, evidence: Evidence, decision: Decision) -> None:
        """Store a diff, its evidence and a verdict other than accepted (to answer why-questions); no head moves.

        Idempotent: the same diff again is kept once, and a decision equal to the diff's latest is not repeated.
        An ACCEPTED decision raises `InvalidOpError` (commit it instead); a different diff under a used id
        `InvalidIdError`; an unknown artifact `UnknownArtifactError`.
        """
        ...

    def revert_commit(self, diff_id: str, inverse: Diff, *, reason: str, numbers: Mapping[str, float] | None = None,
                      expected: int | None = None) -> Version:
        """Undo committed diff `diff_id` with `inverse` (its inverse, rebased onto the dev head), in one
        transaction: commit `inverse` with an ACCEPTED decision and record REVERTED on `diff_id`; stable never moves.

        Compare-and-swap on the dev head at `expected` (default `inverse.base_version`), else `StaleHeadError`.
        `UnknownVersionError` for a diff never committed; `InvalidOpError` for one already reverted, or an
        inverse of another artifact or with no ops. Any error writes nothing.
        """
        ...

    def promote(self, artifact_ids: Sequence[str] | None = None, *,
                expected: Mapping[str, int] | None = None) -> dict[str, int]:
        """Set the stable head to the dev head (of every artifact, or of `artifact_ids`); return the promoted
        version numbers by artifact id.

        `expected` maps artifact ids to the dev versions the caller checked: if a dev head is elsewhere,
        `StaleHeadError` and nothing changes. `UnknownArtifactError` for an unknown id.
        """
        ...

    def promote_to(self, versions: Mapping[str, int]) -> dict[str, int]:
        """Set each artifact's stable head to the given dev version (one checked while dev moved on), all at once.

        `UnknownVersionError` for a version not on dev, `StaleHeadError` if stable is already past one (stable
        never moves back), `UnknownArtifactError` for an unknown id; any error changes nothing.
        """
        ...

    # -- reading the log --------------------------------------------------------------------------------------

    def diff(self, diff_id: str) -> Diff:
        """The stored diff with this id (`UnknownVersionError` if there is none)."""
        ...

    def evidence(self, diff_id: str) -> Evidence:
        """The evidence stored with a diff (the latest, if it was stored more than once)."""
        ...

    def decisions(self, *, diff_id: str | None = None, artifact_id: str | None = None,
                  outcome: Outcome | str | None = None, limit: int | None = None,
                  offset: int = 0) -> list[Decision]:
        """Every stored decision matching all the given filters, oldest first (all of them without filters); with
        `limit`, the page of at most that many that starts `offset` matches in."""
        ...

    def decision_count(self, *, diff_id: str | None = None, artifact_id: str | None = None,
                       outcome: Outcome | str | None = None) -> int:
        """How many stored decisions match all the given filters."""
        ...

    def standings(self, *, artifact_id: str | None = None, limit: int | None = None,
                  offset: int = 0) -> tuple[list[Standing], int]:
        """Each decided diff's latest verdict and number of decisions, in the order the diffs were first decided
        on (only those whose decisions name `artifact_id`, if given), a page of them with `limit` and `offset`;
        and how many diffs there are in all."""
        ...

    def why(self, diff_id: str) -> dict[str, Any]:
        """Why a diff is where it is, JSON-ready: ``diff`` (`Diff.to_dict`), ``evidence`` (a summary: tasks,
        mean_delta, wins, losses, ...), ``decisions`` (`Decision.to_dict` each, oldest first) and ``version`` (the
        version number it made, or None)."""
        ...
