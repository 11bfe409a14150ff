"""The working directory of one run: made empty, filled with the run's files, given to the code's user, and
removed afterwards, whatever the code left in it."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from agentgrad.sandbox.errors import SandboxConfigError


def check_files(files: Mapping[str, str]) -> dict[str, str]:
    """The run's files, checked: relative paths that stay inside the directory, text contents."""
    checked = {}
    for name, text in files.items():
        path = PurePosixPath(name) if isinstance(name, str) else None
        if path is None or not name or "\0" in name or path.is_absolute() or ".." in path.parts:
            raise SandboxConfigError(f"file name {name!r} must be a relative path inside the working directory")
        if not isinstance(text, str):
            raise SandboxConfigError(f"file {name} must be given as text, not {type(text).__name__}")
        checked[str(path)] = text
    return checked


@contextmanager
def working_directory(files: Mapping[str, str], owner: int | None) -> Iterator[str]:
    """A fresh directory holding `files`, owned by `owner` (user and group id; None: keep ours)."""
    root = tempfile.mkdtemp(prefix="agentgrad-sandbox-")
    try:
        for name, text in files.items():
            path = Path(root, name)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        if owner is not None:
            _give(root, owner)
        yield root
    finally:
        _remove(root)


def _give(root: str, owner: int) -> None:
    for folder, _, names in os.walk(root):
        os.chown(folder, owner, owner)
        for name in names:
            os.chown(os.path.join(folder, name), owner, owner, follow_symlinks=False)


def _remove(root: str) -> None:
    """Remove the directory; first let us enter and empty every directory the code made unwritable."""
    os.chmod(root, stat.S_IRWXU)
    for folder, subfolders, _ in os.walk(root):
        for name in subfolders:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                os.chmod(path, stat.S_IRWXU)
    shutil.rmtree(root)
