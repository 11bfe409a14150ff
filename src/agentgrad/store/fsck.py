"""`fsck`: check a run directory without writing to it: the database file, the log against the store, the calls
the log records against the diffs the store holds, and the git mirror against the store.

Each check gives a `Finding` (what was checked, ok or not, and what was found). `agentgrad fsck RUN_DIR` prints
them and exits non-zero if any is not ok. Nothing is repaired here: a writable open of the store rebuilds a missing
or damaged mirror (`mirroring.check`); a damaged database is restored from a copy, or the run started afresh.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, cast

from dulwich.repo import Repo

from agentgrad.errors import AgentgradError, DamagedStoreError
from agentgrad.store.kinds import EventKind
from agentgrad.store.protocol import Store
from agentgrad.store.sqlite import DB_NAME, GIT_NAME, SQLiteStore

if TYPE_CHECKING:
    from dulwich.objects import ObjectID


@dataclass(frozen=True)
class Finding:
    """One check: its name, whether it passed, and what it found."""

    check: str
    ok: bool
    detail: str


def fsck(run_dir: str | Path) -> list[Finding]:
    """Every check of `run_dir` (read-only); the database must exist."""
    path = Path(run_dir)
    try:
        store = SQLiteStore(path, readonly=True)
    except AgentgradError as exc:
        return [Finding("database", False, str(exc))]
    with store:
        findings = [_guard("database", lambda: _integrity(store))]
        findings += [_guard(f"log and store: {a}", partial(_agreement, store, a)) for a in store.artifact_ids()]
        findings.append(_guard("calls", lambda: _calls(store)))
        findings.append(_guard("git mirror", lambda: _mirror(store, path / GIT_NAME)))
    return findings


def _guard(check: str, body: Callable[[], str]) -> Finding:
    try:
        detail = body()
    except AgentgradError as exc:
        return Finding(check, False, str(exc))
    return Finding(check, True, detail)


def _integrity(store: SQLiteStore) -> str:
    store.check_integrity()
    return f"{DB_NAME} passes SQLite's integrity check"


def check_agreement(store: Store, artifact_id: str) -> None:
    """The journal and the store tell the same story of `artifact_id`'s commits (a step writes both in one
    transaction): a damaged file that lost some of either raises `DamagedStoreError` rather than being resumed with
    less spent than was."""
    logged = sorted((int(e.payload["version"]), str(e.payload["diff"])) for e in store.journal.read([EventKind.COMMIT])
                    if e.payload["artifact"] == artifact_id)
    stored = [(v.number, str(v.diff_id)) for v in store.history(artifact_id)[1:]]
    if logged != stored:
        pairs = zip(logged, stored, strict=False)
        first = next((i for i, (a, b) in enumerate(pairs) if a != b), min(len(logged), len(stored))) + 1
        raise DamagedStoreError(f"{store.run_dir}: the event log names {len(logged)} commits of {artifact_id!r} "
                                f"and the store holds {len(stored)} (they first differ at version {first}); the run "
                                "directory is damaged: restore it from a copy, or start a new run directory")


def _agreement(store: SQLiteStore, artifact_id: str) -> str:
    check_agreement(store, artifact_id)
    return f"{len(store.history(artifact_id)) - 1} commits in both"


def _calls(store: SQLiteStore) -> str:
    """Every stored diff's proposal call (ids ``p<call>``) is one the log dispatched: nothing was spent unlogged."""
    dispatched = store.journal.count(EventKind.DISPATCH)
    numbers = [int(d.diff_id[1:7]) for d in store.decisions() if d.diff_id[:1] == "p" and d.diff_id[1:7].isdigit()]
    highest = max(numbers, default=-1)
    if highest >= dispatched:
        raise AgentgradError(f"the store holds diff p{highest:06d} but the log dispatched only {dispatched} calls")
    return f"{dispatched} calls dispatched, every stored diff's among them"


def _mirror(store: SQLiteStore, git: Path) -> str:
    lag = store.git_lag()
    if not (git / "HEAD").exists():
        raise AgentgradError(f"{git} is missing (the next writable open rebuilds it from the store)")
    last = store.last_mirrored()
    repo = Repo(str(git))
    try:
        refs = {bytes(name): bytes(sha) for name, sha in repo.refs.as_dict().items()}
        tip = refs.get(b"refs/heads/dev")
        if last is not None and (tip is None or tip.decode() != last):
            raise AgentgradError(f"{git}: dev is at {tip!r}, the store last mirrored {last[:12]} (the next "
                                 "writable open rebuilds it, or refuses another run's history)")
        if last is not None:
            repo[cast("ObjectID", last.encode())]
    except (KeyError, ValueError, OSError) as exc:
        raise AgentgradError(f"{git}: the last mirrored commit cannot be read ({exc})") from exc
    finally:
        repo.close()
    return f"dev at the store's last mirrored commit; {lag} version(s) not mirrored yet"
