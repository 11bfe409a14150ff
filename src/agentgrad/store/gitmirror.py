"""The git mirror: every committed version as one commit of a bare repository, written with dulwich.

Each commit's tree holds every artifact's text at that moment, at the path equal to the artifact id; its message
tells the story (what changed, which stage decided, why, and the numbers). Objects of a batch go into one pack;
commits are deterministic (times come from the store), so writing the same versions twice gives the same shas.
The store decides what to mirror and when; this module only turns plain values into git objects and refs.
"""

from __future__ import annotations

import os
import shutil
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from dulwich.errors import ChecksumMismatch, ObjectFormatException
from dulwich.file import FileLocked
from dulwich.objects import Blob, Commit, ShaFile, Tree
from dulwich.repo import Repo
from filelock import FileLock

from agentgrad.core.decision import Decision
from agentgrad.core.diff import Diff
from agentgrad.errors import InvalidIdError

if TYPE_CHECKING:
    from dulwich.objects import ObjectID
    from dulwich.refs import Ref

FILE_MODE = 0o100644
DIR_MODE = 0o040000
COMMITTER = b"agentgrad <agentgrad@localhost>"
BRANCHES = ("dev", "stable")
WRITER_TIMEOUT = 120.0  # seconds to wait for another process's git write before raising filelock.Timeout


@dataclass(frozen=True)
class MirrorCommit:
    """One version to mirror: the file it changes (`path` = artifact id), its new text, message, time, author."""

    path: str
    text: str
    message: str
    time: int
    author: str = ""


def version_message(artifact_id: str, number: int, diff: Diff | None, decision: Decision | None) -> str:
    """The commit message of one version: a title line, then the decision's stage, reason and numbers.

    >>> version_message("skills/a", 0, None, None).splitlines()[0]
    'skills/a v0: initial text'
    """
    if diff is None:
        return f"{artifact_id} v{number}: initial text\n"
    rationale = diff.rationale.strip().splitlines()[0] if diff.rationale.strip() else diff.id
    lines = [f"{artifact_id} v{number}: {rationale}", ""]
    if decision is not None:
        numbers = ", ".join(f"{k}={_number(v)}" for k, v in sorted(decision.numbers.items()))
        lines += [f"stage: {decision.stage}", f"reason: {decision.reason}", f"numbers: {numbers}"]
    lines += [f"diff: {diff.id}", f"base: v{diff.base_version}", f"author: {diff.author or '-'}"]
    return "\n".join(lines) + "\n"


def _number(value: float) -> str:
    return str(value) if isinstance(value, int) else f"{value:.6g}"


def _identity(name: str) -> bytes:
    clean = "".join(ch for ch in name if ch not in "<>\n\r\x00").strip() or "agentgrad"
    return f"{clean} <agentgrad@localhost>".encode()


class _TreeBuilder:
    """Nested git trees kept incrementally: changing one file rebuilds only the trees on its path.

    State: the entries of every directory (path -> {name: (mode, sha)}) and the directories changed since the last
    `flush`.
    """

    def __init__(self) -> None:
        self._entries: dict[str, dict[bytes, tuple[int, ObjectID]]] = {"": {}}
        self._dirty: set[str] = {""}
        self._root: ObjectID | None = None

    def set(self, path: str, blob: ObjectID) -> None:
        """Point the file at `path` to `blob`."""
        parts = path.split("/")
        for depth in range(len(parts)):
            directory = "/".join(parts[:depth])
            self._entries.setdefault(directory, {})
            self._dirty.add(directory)
        self._entries["/".join(parts[:-1])][parts[-1].encode()] = (FILE_MODE, blob)

    def flush(self, out: dict[ObjectID, ShaFile]) -> ObjectID:
        """Build the changed trees (deepest first) into `out`; return the root tree's id."""
        for directory in sorted(self._dirty, key=lambda d: -(d.count("/") + 1) if d else 0):
            tree = Tree()
            for name, (mode, sha) in self._entries[directory].items():
                tree.add(name, mode, sha)
            out[tree.id] = tree
            if directory:
                parent, _, base = directory.rpartition("/")
                self._entries[parent][base.encode()] = (DIR_MODE, tree.id)
            else:
                self._root = tree.id
        self._dirty.clear()
        assert self._root is not None
        return self._root


def _blob(text: str, out: dict[ObjectID, ShaFile]) -> ObjectID:
    blob = Blob.from_string(text.encode("utf-8"))
    out[blob.id] = blob
    return blob.id


def _commit(tree: ObjectID, parent: str | None, message: str, time: int, author: str) -> Commit:
    commit = Commit()
    commit.tree = tree
    commit.parents = [cast("ObjectID", parent.encode())] if parent else []
    commit.author = _identity(author)
    commit.committer = COMMITTER
    commit.author_time = commit.commit_time = int(time)
    commit.author_timezone = commit.commit_timezone = 0
    commit.encoding = b"UTF-8"
    commit.message = message.encode("utf-8")
    return commit


def _clear_stale_locks(path: Path) -> None:
    """Remove what a killed writer leaves: ref and index lock files, temporary packs, packs without an index."""
    packs = path / "objects" / "pack"
    stale = [*(path / "refs").rglob("*.lock"), *packs.glob("*.lock"), *(path / "objects").glob("tmp_pack_*"),
             *(pack for pack in packs.glob("*.pack") if not pack.with_suffix(".idx").exists())]
    packed = path / "packed-refs.lock"
    for leftover in [*stale, packed] if packed.exists() else stale:
        leftover.unlink()


class GitMirror:
    """A bare git repository at `path` (created if missing) with branches `dev` and `stable`.

    State: an open dulwich `Repo`. Not safe for concurrent ref updates by itself: the store serialises them.
    """

    def __init__(self, path: Path) -> None:
        """Open the mirror at `path`, creating it if needed. Call it under the store's write lock.

        Creation is atomic (built beside the target, then renamed), so a process killed while creating it leaves
        no half-made repository. Every write holds an OS file lock beside the repository (released by the OS when
        a process dies), so lock and temporary files found while holding it were left by a killed writer: they are
        removed (a pack without its index is invisible to git and is rewritten by the next sync).
        """
        self.path = path
        self._guard = FileLock(path.with_name(f"{path.name}.writer.lock"), timeout=WRITER_TIMEOUT)
        with self._guard:
            if not (path / "HEAD").exists():
                self._create(path)
            _clear_stale_locks(path)
        self._repo = Repo(str(path))

    @staticmethod
    def _create(path: Path) -> None:
        if path.exists():
            shutil.rmtree(path)  # a half-made repository from a killed process: it has no HEAD, hence no history
        staging = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        if staging.exists():
            shutil.rmtree(staging)
        repo = Repo.init_bare(str(staging), mkdir=True)
        repo.refs.set_symbolic_ref(cast("Ref", b"HEAD"), cast("Ref", b"refs/heads/dev"))
        repo.close()
        os.replace(staging, path)

    def close(self) -> None:
        """Release the repository's files."""
        self._repo.close()

    def write_versions(self, files: Mapping[str, str], parent: str | None,
                       commits: Sequence[MirrorCommit]) -> list[str]:
        """Write one commit per item of `commits`, in order, on top of `parent`; return their hex shas.

        Args:
            files: every artifact's text (path -> text) in the state `parent` records.
            parent: the hex sha of the commit to build on, or None for the first commit.
            commits: the versions to mirror, in commit order.
        The branch refs are not moved; see `set_branch`.
        """
        objects: dict[ObjectID, ShaFile] = {}
        trees = _TreeBuilder()
        for path, text in files.items():
            trees.set(path, _blob(text, objects))
        shas: list[str] = []
        for item in commits:
            trees.set(item.path, _blob(item.text, objects))
            commit = _commit(trees.flush(objects), parent, item.message, item.time, item.author)
            objects[commit.id] = commit
            parent = commit.id.decode()
            shas.append(parent)
        self._store(objects)
        return shas

    def write_snapshot(self, files: Mapping[str, str], parent: str | None, message: str, time: int) -> str:
        """Write one commit whose tree is exactly `files`; return its hex sha."""
        objects: dict[ObjectID, ShaFile] = {}
        trees = _TreeBuilder()
        for path, text in files.items():
            trees.set(path, _blob(text, objects))
        commit = _commit(trees.flush(objects), parent, message, time, "agentgrad")
        objects[commit.id] = commit
        self._store(objects)
        return commit.id.decode()

    def _store(self, objects: dict[ObjectID, ShaFile]) -> None:
        store = self._repo.object_store
        missing = [(obj, None) for sha, obj in objects.items() if sha not in store]
        if missing:
            self._write(lambda: store.add_objects(missing))

    def set_branch(self, branch: str, sha: str) -> None:
        """Point `refs/heads/<branch>` at the commit `sha`."""
        if branch not in BRANCHES:
            raise InvalidIdError(f"unknown branch {branch!r}; expected one of {BRANCHES}")
        def move() -> None:
            self._repo.refs[cast("Ref", f"refs/heads/{branch}".encode())] = cast("ObjectID", sha.encode())
        self._write(move)

    def _write(self, write: Callable[[], object]) -> None:
        """Run `write` holding the writer lock; a git lock file met meanwhile was left by a writer that died after
        this mirror was opened (no live one can hold it: it would hold the writer lock), so it is cleared and the
        write tried once more."""
        with self._guard:
            try:
                write()
            except FileLocked:
                _clear_stale_locks(self.path)
                write()

    def readable(self, sha: str) -> bool:
        """True if the commit `sha` and its tree can be read (False: missing, or its pack is damaged)."""
        try:
            commit = self._repo[cast("ObjectID", sha.encode())]
            if not isinstance(commit, Commit):
                return False
            self._repo[commit.tree]
        except (KeyError, ValueError, OSError, zlib.error, ChecksumMismatch, ObjectFormatException):
            return False
        return True

    def recreate(self) -> None:
        """Replace the repository by a new, empty one (the store rebuilds its history: it is the source of truth)."""
        with self._guard:
            self._repo.close()
            self._create(self.path)
        self._repo = Repo(str(self.path))

    def branch(self, branch: str) -> str | None:
        """The hex sha `refs/heads/<branch>` points at, or None if the branch does not exist yet."""
        refs = self._repo.refs.as_dict()
        sha = refs.get(cast("Ref", f"refs/heads/{branch}".encode()))
        return sha.decode() if sha is not None else None
