"""The git mirror is checked when a store opens: missing or damaged, it is rebuilt from the store (the same
commits come back); another run's history is refused and left alone."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agentgrad.core.artifact import Artifact, Kind
from agentgrad.errors import ForeignMirrorError
from agentgrad.store.sqlite import GIT_NAME, SQLiteStore
from tests.store.test_transaction import _accepted


def _run(path: Path, rules: int = 3) -> str:
    """A store with `rules` commits, mirrored; the git sha of dev."""
    with SQLiteStore(path) as store:
        store.add_artifact(Artifact("skill", Kind.SKILL, "# Skill\n"))
        store.commit_many([_accepted(n, f"- r{n}: use method {n}") for n in range(rules)])
        store.sync_git()
        tip = store._mirror.branch("dev") if store._mirror is not None else None
    assert tip is not None
    return tip


def _open_tip(path: Path) -> tuple[str | None, bool]:
    with SQLiteStore(path) as store:
        store.sync_git()
        assert store._mirror is not None
        return store._mirror.branch("dev"), store.mirror_rebuilt


def test_a_deleted_mirror_comes_back_with_the_same_history(tmp_path: Path) -> None:
    tip = _run(tmp_path)
    shutil.rmtree(tmp_path / GIT_NAME)
    assert _open_tip(tmp_path) == (tip, True)
    assert _open_tip(tmp_path) == (tip, False)  # and it is fine from then on


def test_a_damaged_pack_is_noticed_and_the_mirror_rebuilt(tmp_path: Path) -> None:
    tip = _run(tmp_path)
    packs = list((tmp_path / GIT_NAME / "objects" / "pack").glob("*.pack"))
    assert packs
    for pack in packs:
        data = bytearray(pack.read_bytes())
        data[12:] = bytes(len(data) - 12)  # the objects zeroed, the header kept
        pack.write_bytes(bytes(data))
    assert _open_tip(tmp_path) == (tip, True)


def test_a_mirror_holding_another_runs_history_is_refused_and_left_alone(tmp_path: Path) -> None:
    other = _run(tmp_path / "old", rules=2)
    (tmp_path / "new").mkdir()
    shutil.copytree(tmp_path / "old" / GIT_NAME, tmp_path / "new" / GIT_NAME)
    with pytest.raises(ForeignMirrorError, match="holds a history this run did not write"):
        SQLiteStore(tmp_path / "new")
    assert _open_tip(tmp_path / "old") == (other, False)
