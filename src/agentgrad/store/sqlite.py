"""`SQLiteStore`: the run's source of truth, an embedded SQLite database at ``<run_dir>/agentgrad.db``.

It keeps content-addressed artifact versions, every diff with its evidence and decisions, and the `dev` and
`stable` heads. Commits are compare-and-swap on the dev head inside one ``BEGIN IMMEDIATE`` transaction, so they
hold across threads and processes that open the same run directory. Every committed version is mirrored to a bare
git repository at ``<run_dir>/library.git`` (in batches; see `sync_git`).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType
from typing import Any

from agentgrad.core.artifact import Artifact, Kind, Layer, Version, default_layer
from agentgrad.core.decision import Decision, Outcome, Standing
from agentgrad.core.diff import Diff, apply, fingerprint, invert
from agentgrad.core.evidence import Evidence
from agentgrad.core.ids import validate_id
from agentgrad.errors import (
    FrozenLayerError,
    InvalidIdError,
    InvalidOpError,
    StaleHeadError,
    UnknownArtifactError,
    UnknownVersionError,
)
from agentgrad.store import codec, members, mirroring, tables
from agentgrad.store.events import EventLog
from agentgrad.store.gitmirror import GitMirror
from agentgrad.store.transaction import Transactions, damage_reported

DB_NAME = tables.DB_NAME
GIT_NAME = "library.git"


class SQLiteStore:
    """The versioned artifact store of one run directory.

    Args:
        run_dir: the run directory (created if missing); the database is ``run_dir/agentgrad.db``.
        git: mirror committed versions to ``run_dir/library.git``.
        readonly: open an existing store for reading only: nothing is written, not even a setting, so a run
            directory the user cannot write can be read; every write raises. No git mirror.
        clock: the time source for created-at stamps (and git commit times); `time.time` by default.
        busy_timeout: seconds to wait for another writer before giving up.
    State: one SQLite connection (guarded by a lock, so one store may be shared by threads), a cache of texts
    by content hash (`tables.Blobs`), and the git mirror. Use as a context manager or call `close()` (which
    syncs the mirror).
    """

    def __init__(self, run_dir: str | Path, *, git: bool = True, clock: Callable[[], float] = time.time,
                 busy_timeout: float = 30.0, readonly: bool = False) -> None:
        self.run_dir = Path(run_dir)
        if not readonly:
            self.run_dir.mkdir(parents=True, exist_ok=True)
        git = git and not readonly
        self._clock = clock
        self._blobs = tables.Blobs()
        self._conn = tables.connect(self.run_dir / DB_NAME, busy_timeout, readonly=readonly)
        self._tx = Transactions(self._conn, str(self.run_dir / DB_NAME))
        self._lock, self._write, self._read = self._tx.lock, self._tx.write, self._tx.read
        self.journal = EventLog.sharing(self._tx, clock=clock)
        self._mirror: GitMirror | None = None
        self.mirror_rebuilt = False  # True when the git mirror was missing or damaged: rebuilt from the store
        if git:
            with self._write():  # serialises creating (and checking) the repository with other openers
                self._mirror = GitMirror(self.run_dir / GIT_NAME)
                self.mirror_rebuilt = mirroring.check(self._conn, self._mirror, self._write)

    def transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        """One unit of work: every store write and `journal` event inside the block commits together when it
        ends, or none does (``BEGIN IMMEDIATE``; a write inside joins it). The git mirror catches up after the
        commit. An optimizer step's commits, verdicts, events and checkpoint go in one such block."""
        return self._write()

    def close(self, *, sync: bool = True) -> None:
        """Write the journal's deferred events, catch the git mirror up (unless not `sync`: a store found damaged
        is closed without touching it again), then close the database and the repository."""
        with self._lock:
            try:
                if sync:
                    self.journal.flush()
                    self._sync_mirror()
            finally:
                if self._mirror is not None:
                    self._mirror.close()
                    self._mirror = None
                self._conn.close()

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    # -- artifacts and versions -------------------------------------------------------------------------------

    def add_artifact(self, artifact: Artifact) -> Version:
        """Add `artifact` as version 0 on both branches; a no-op returning version 0 if it is already there.

        Raises `InvalidIdError` if the id exists with other content, or would clash with another id as file
        versus directory in the git tree (``"a"`` and ``"a/b"``).
        """
        now = self._clock()
        with self._write() as c:
            row = c.execute("SELECT kind, layer FROM artifacts WHERE id = ?", (artifact.id,)).fetchone()
            if row is not None:
                existing = Artifact(artifact.id, Kind(row[0]), tables.version(c, artifact.id, 0).text, Layer(row[1]))
                if existing != artifact:
                    raise InvalidIdError(f"artifact {artifact.id!r} already exists with other kind, layer or text")
                return tables.version(c, artifact.id, 0)
            tables.check_tree_path(c, artifact.id)
            text_hash = self._blobs.put(c, artifact.text)
            layer = Layer(artifact.layer) if artifact.layer is not None else default_layer(artifact.kind)
            c.execute("INSERT INTO artifacts (id, kind, layer, created) VALUES (?, ?, ?, ?)",
                      (artifact.id, artifact.kind.value, layer.value, now))
            c.execute(tables.INSERT_VERSION, (artifact.id, 0, text_hash, None, now))
            c.executemany("INSERT INTO heads (artifact_id, branch, number) VALUES (?, ?, 0)",
                          [(artifact.id, b) for b in tables.BRANCHES])
            tables.log_stable(c, f"add {artifact.id}", now)
        return Version(artifact.id, 0, artifact.text, None, text_hash)

    def artifact(self, artifact_id: str, branch: str = "dev") -> Artifact:
        """The artifact with its text at the head of `branch`."""
        with self._read() as c:
            head = tables.head(c, artifact_id, branch)
            return Artifact(artifact_id, Kind(head.kind), self._blobs.get(c, head.hash), Layer(head.layer))

    def artifact_ids(self) -> list[str]:
        """Every artifact id, sorted."""
        with self._lock:
            return [r[0] for r in self._conn.execute("SELECT id FROM artifacts ORDER BY id").fetchall()]

    def head(self, artifact_id: str, branch: str = "dev") -> Version:
        """The version at the head of `branch`."""
        with self._read() as c:
            head = tables.head(c, artifact_id, branch)
            return Version(artifact_id, head.number, self._blobs.get(c, head.hash), head.diff_id, head.hash)

    def heads(self, branch: str = "dev") -> dict[str, Version]:
        """The head version of every artifact on `branch`, by artifact id."""
        sql = (f"{tables.VERSIONS} JOIN heads h ON h.artifact_id = v.artifact_id AND h.number = v.number "
               "WHERE h.branch = ? ORDER BY v.artifact_id")
        with self._lock:
            rows = self._conn.execute(sql, (tables.check_branch(branch),)).fetchall()
        return {r[0]: Version(*r) for r in rows}

    def version(self, artifact_id: str, number: int) -> Version:
        """Version `number` of an artifact."""
        with self._read() as c:
            return tables.version(c, artifact_id, number)

    def history(self, artifact_id: str) -> list[Version]:
        """Every version of an artifact, oldest first."""
        with self._read() as c:
            tables.head(c, artifact_id)
            rows = c.execute(f"{tables.VERSIONS} WHERE v.artifact_id = ? ORDER BY v.number", (artifact_id,)).fetchall()
        return [Version(*r) for r in rows]

    # -- writes -----------------------------------------------------------------------------------------------

    def commit(self, diff: Diff, evidence: Evidence, decision: Decision, *, expected: int | None = None) -> Version:
        """Apply `diff` to the dev head and make it the new head, storing its evidence and decision.

        Compare-and-swap: the dev head must be at `expected` (default `diff.base_version`), else
        `StaleHeadError`. L0 artifacts raise `FrozenLayerError`; ops that do not apply raise
        `ApplyConflictError`. Any error writes nothing.
        """
        codec.check_commit(diff, decision)
        now = self._clock()
        with self._write() as c:
            return self._commit_in(c, diff, evidence, decision, expected, now)

    def commit_many(self, items: Sequence[tuple[Diff, Evidence, Decision]]) -> list[Version]:
        """`commit` each item in order, all in one transaction: either every item is committed or none is."""
        items = list(items)
        for diff, _, decision in items:
            codec.check_commit(diff, decision)
        now = self._clock()
        with self._write() as c:
            return [self._commit_in(c, d, e, k, None, now) for d, e, k in items]

    def _commit_in(self, conn: sqlite3.Connection, diff: Diff, evidence: Evidence, decision: Decision,
                   expected: int | None, now: float) -> Version:
        head = tables.head(conn, diff.artifact_id)
        if head.layer == Layer.L0.value:
            raise FrozenLayerError(f"artifact {diff.artifact_id!r} is L0 (frozen); diff {diff.id!r} refused")
        want = diff.base_version if expected is None else expected
        if head.number != want:
            raise StaleHeadError(f"{diff.artifact_id!r}: dev head is v{head.number}, not v{want} "
                                 f"(diff {diff.id!r}); rebase and try again")
        before = self._blobs.get(conn, head.hash)
        text = apply(diff, before)
        text_hash = self._blobs.put(conn, text)
        tables.put_diff(conn, diff, now, committing=True)
        tables.put_evidence(conn, diff.id, evidence)
        tables.put_decision(conn, decision, now)
        number = head.number + 1
        conn.execute(tables.INSERT_VERSION, (diff.artifact_id, number, text_hash, diff.id, now))
        conn.execute("UPDATE heads SET number = ? WHERE artifact_id = ? AND branch = 'dev'", (number, diff.artifact_id))
        if head.kind == Kind.LIBRARY.value:  # its members commit their parts in this transaction (`members`)
            members.mirror(conn, diff, evidence, decision, before, text, lambda d, e, k, n: self._commit_in(
                conn, d, e, k, n, now), lambda h: self._blobs.get(conn, h))
        return Version(diff.artifact_id, number, text, diff.id, text_hash)

    def record(self, diff: Diff, evidence: Evidence, decision: Decision) -> None:
        """Store a diff, its evidence and a verdict other than accepted, to answer why-questions later.

        Idempotent: the same diff again is kept once, and a decision equal to the diff's latest one is not
        repeated. A different diff under an existing id raises `InvalidIdError`.
        """
        codec.check_pair(diff, decision)
        if Outcome(decision.outcome) is Outcome.ACCEPTED:
            raise InvalidOpError(f"record() keeps verdicts other than accepted; commit diff {diff.id!r} instead")
        now = self._clock()
        with self._write() as c:
            tables.head(c, diff.artifact_id)
            tables.put_diff(c, diff, now, committing=False)
            tables.put_evidence(c, diff.id, evidence)
            if tables.get_decisions(c, [("diff_id", diff.id)], last=True) != [decision]:
                tables.put_decision(c, decision, now)

    def revert(self, artifact_id: str, *, reason: str, expected: int | None = None) -> Version:
        """Commit the inverse of the diff that made the dev head, and record a REVERTED decision on that diff;
        `expected`: the dev head the caller saw (compare-and-swap). `UnknownVersionError` at version 0."""
        now = self._clock()
        with self._write() as c:
            head = tables.head(c, artifact_id)
            if head.diff_id is None:
                raise UnknownVersionError(f"artifact {artifact_id!r} is at version 0; there is nothing to revert")
            original = tables.get_diff(c, head.diff_id)
            inverse = invert(original, tables.version(c, artifact_id, head.number - 1).text)
            inverse = Diff(artifact_id, head.number, inverse.ops, author=original.author,
                           rationale=f"revert {original.id}: {reason}")
            return self._revert_in(c, original, inverse, reason, {"reverted_version": head.number}, expected, now)

    def revert_commit(self, diff_id: str, inverse: Diff, *, reason: str, numbers: Mapping[str, float] | None = None,
                      expected: int | None = None) -> Version:
        """Undo committed diff `diff_id` (any version, not only the head's) with `inverse`, its inverse rebased onto
        the dev head, in one transaction: commit `inverse` (ACCEPTED, stage "revert"), record REVERTED on `diff_id`;
        `stable` never moves. Compare-and-swap on the dev head at `expected` (default `inverse.base_version`), else
        `StaleHeadError`; `UnknownVersionError` for a diff never committed, `InvalidOpError` for one already
        reverted or an inverse of another artifact or with no ops. Any error writes nothing."""
        now = self._clock()
        with self._write() as c:
            original = tables.get_diff(c, diff_id)
            row = c.execute("SELECT number FROM versions WHERE diff_id = ?", (original.id,)).fetchone()
            if row is None:
                raise UnknownVersionError(f"diff {diff_id!r} was never committed; there is nothing to revert")
            last = [d.outcome for d in tables.get_decisions(c, [("diff_id", original.id)], last=True)]
            if Outcome.REVERTED in last or inverse.artifact_id != original.artifact_id or not inverse.ops:
                raise InvalidOpError(f"cannot revert {diff_id!r}: already reverted, or the inverse edits nothing of "
                                     f"{original.artifact_id!r}")
            figures = {**(numbers or {}), "reverted_version": int(row[0])}
            return self._revert_in(c, original, inverse, reason, figures, expected, now)

    def _revert_in(self, conn: sqlite3.Connection, original: Diff, inverse: Diff, reason: str,
                   numbers: Mapping[str, float], expected: int | None, now: float) -> Version:
        """Commit `inverse` with an ACCEPTED "revert" decision, then record REVERTED on `original`."""
        accept = Decision(inverse.id, inverse.artifact_id, Outcome.ACCEPTED, "revert", reason, dict(numbers),
                          fingerprint(inverse))
        empty = Evidence((), base_version=inverse.base_version)
        version = self._commit_in(conn, inverse, empty, accept, expected, now)
        reverted = Decision(original.id, original.artifact_id, Outcome.REVERTED, "revert", reason,
                            {**numbers, "revert_version": version.number}, fingerprint(original))
        tables.put_decision(conn, reverted, now)
        return version

    def promote(self, artifact_ids: Sequence[str] | None = None, *,
                expected: Mapping[str, int] | None = None) -> dict[str, int]:
        """Set the stable head to the dev head (all artifacts, or `artifact_ids`); return the promoted versions.

        `expected` maps artifact ids to the dev versions the caller checked (e.g. on held-out data); if a dev head
        has moved past it, `StaleHeadError` is raised and nothing changes. Moves the git `stable` branch too.
        """
        now = self._clock()
        with self._write() as c:
            dev, stable = tables.branch_numbers(c, "dev"), tables.branch_numbers(c, "stable")
            ids = sorted(dev) if artifact_ids is None else [validate_id(a) for a in artifact_ids]
            for artifact_id in [*ids, *(expected or {})]:
                if artifact_id not in dev:
                    raise UnknownArtifactError(f"cannot promote unknown artifact {artifact_id!r}")
            for artifact_id, number in (expected or {}).items():
                if dev[artifact_id] != number:
                    raise StaleHeadError(f"{artifact_id!r}: dev head is v{dev[artifact_id]}, not the checked "
                                         f"v{number}; nothing promoted")
            self._move_stable(c, {a: dev[a] for a in ids}, stable, now)
        return {a: dev[a] for a in ids}

    def promote_to(self, versions: Mapping[str, int]) -> dict[str, int]:
        """Set each artifact's stable head to the given dev version (one that was checked while dev moved on).

        A version must exist on dev; stable never moves back (`StaleHeadError` if it is already past one). Moves
        the git `stable` branch too. Returns the promoted versions.
        """
        now = self._clock()
        with self._write() as c:
            dev, stable = tables.branch_numbers(c, "dev"), tables.branch_numbers(c, "stable")
            for artifact_id, number in versions.items():
                if artifact_id not in dev:
                    raise UnknownArtifactError(f"cannot promote unknown artifact {artifact_id!r}")
                if not 0 <= number <= dev[artifact_id]:
                    raise UnknownVersionError(f"{artifact_id!r} has no version {number} on dev")
                if stable[artifact_id] > number:
                    raise StaleHeadError(f"{artifact_id!r}: stable is already at v{stable[artifact_id]}, past "
                                         f"v{number}; nothing promoted")
            self._move_stable(c, dict(sorted(versions.items())), stable, now)
        return dict(versions)

    def _move_stable(self, c: sqlite3.Connection, targets: Mapping[str, int], stable: Mapping[str, int],
                     now: float) -> None:
        """Move each stable head to its target (in `targets`' order; a library's members follow it), log the change,
        mirror it after the commit."""
        changed = {a: n for a, n in members.stable_targets(c, targets).items() if stable[a] != n}
        c.executemany("UPDATE heads SET number = ? WHERE artifact_id = ? AND branch = 'stable'",
                      [(n, a) for a, n in changed.items()])
        if changed:
            tables.log_stable(c, "promote " + ", ".join(f"{a} v{n}" for a, n in changed.items()), now)
        self._tx.after_commit(self._sync_mirror)

    # -- reading the log --------------------------------------------------------------------------------------

    def diff(self, diff_id: str) -> Diff:
        """The stored diff with this id (`UnknownVersionError` if there is none)."""
        with self._read() as c:
            return tables.get_diff(c, diff_id)

    def evidence(self, diff_id: str) -> Evidence:
        """The evidence stored with a diff (the latest, if it was recorded more than once)."""
        with self._read() as c:
            return tables.get_evidence(c, diff_id)

    def decisions(self, *, diff_id: str | None = None, artifact_id: str | None = None,
                  outcome: Outcome | str | None = None, limit: int | None = None,
                  offset: int = 0) -> list[Decision]:
        """Every stored decision matching the filters, oldest first (a page of them with `limit` and `offset`);
        `decision_count` says how many match in all."""
        with self._lock:
            return tables.get_decisions(self._conn, tables.decision_filters(diff_id, artifact_id, outcome), limit=limit,
                                        offset=offset)

    def decision_count(self, *, diff_id: str | None = None, artifact_id: str | None = None,
                       outcome: Outcome | str | None = None) -> int:
        """How many stored decisions match the filters."""
        with self._lock:
            return tables.count_decisions(self._conn, tables.decision_filters(diff_id, artifact_id, outcome))

    def standings(self, *, artifact_id: str | None = None, limit: int | None = None,
                  offset: int = 0) -> tuple[list[Standing], int]:
        """Each decided diff's latest verdict and decision count, in order of first decision, and how many."""
        with self._read() as c:
            return tables.get_standings(c, artifact_id, limit, offset)

    def why(self, diff_id: str) -> dict[str, Any]:
        """Why a diff is where it is: the diff, a summary of its evidence, its decisions and its version if any."""
        with self._read() as c:
            return tables.why(c, diff_id)

    # -- git mirror -------------------------------------------------------------------------------------------

    def sync_git(self, *, batch: int = 2000) -> int:
        """Write every committed version (and stable move) not yet mirrored to git; return the commits written.

        `batch` versions go into each git pack. Without a mirror (``git=False``) this writes nothing and returns 0.
        """
        with self._lock:
            if self._mirror is None:
                return 0
            with damage_reported(str(self.run_dir / DB_NAME)):
                return mirroring.sync(self._conn, self._mirror, self._write, batch=batch)

    def check_integrity(self) -> None:
        """SQLite's quick integrity check of the whole file; `DamagedStoreError` saying what it found if not ok."""
        with self._read() as c:
            tables.quick_check(c, self.run_dir / DB_NAME, self.run_dir / GIT_NAME)

    def _sync_mirror(self) -> None:
        if self._mirror is not None:
            self.sync_git()

    def last_mirrored(self) -> str | None:
        """The git sha of the last version mirrored to `dev`, or None."""
        with self._read() as c:
            row = c.execute("SELECT sha FROM mirror ORDER BY seq DESC LIMIT 1").fetchone()
        return None if row is None else str(row[0])

    def git_lag(self) -> int:
        """How many committed versions the git mirror is behind."""
        with self._lock:
            return mirroring.lag(self._conn)
