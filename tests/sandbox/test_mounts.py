"""The mount plan: what is covered, what is bound back, and which directories a stranger could not enter."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from agentgrad.sandbox.mounts import DEVICE_LINKS, HIDDEN, _first_closed_ancestor, plan_mounts


def _ancestors(path: str) -> list[str]:
    parts = path.strip("/").split("/")
    return ["/" + "/".join(parts[:depth]) for depth in range(1, len(parts))]


def test_shared_writable_places_and_devices_are_covered(tmp_path: Path) -> None:
    plan = plan_mounts(str(tmp_path), [sys.prefix], as_stranger=False, own_network=True)
    assert set(plan.hide) == {path for path in HIDDEN if os.path.isdir(path) and not os.path.islink(path)}
    assert plan.writable == os.path.realpath(tmp_path)
    assert "/dev/null" in plan.expose and "/dev/urandom" in plan.expose and "/dev/shm" not in plan.expose
    assert plan.links == DEVICE_LINKS and plan.sysfs


def test_every_exposed_path_lies_under_a_covered_one_and_covers_do_not_nest(tmp_path: Path) -> None:
    inside = tmp_path / "venv"
    inside.mkdir()
    plan = plan_mounts(str(tmp_path / "work"), [str(inside), sys.base_prefix, sys.executable], as_stranger=True,
                       own_network=False)
    assert os.path.realpath(inside) in plan.expose  # under /tmp, which is covered
    for path in plan.expose:
        assert any(path == root or path.startswith(root + "/") for root in plan.hide), path
    for root in plan.hide:
        assert not any(root.startswith(other + "/") for other in plan.hide if other != root)
    assert not plan.sysfs


def test_a_directory_strangers_cannot_enter_is_found(tmp_path: Path) -> None:
    closed = tmp_path / "closed"
    (closed / "inner" / "prefix").mkdir(parents=True)
    closed.chmod(0o700)
    target = str((closed / "inner" / "prefix").resolve())
    found = _first_closed_ancestor(target)
    assert found is not None and target.startswith(found + "/")
    assert not os.stat(found).st_mode & stat.S_IXOTH
    assert all(os.stat(above).st_mode & stat.S_IXOTH for above in [*_ancestors(found), "/"] if above != found)


def test_an_open_path_has_no_closed_ancestor() -> None:
    assert _first_closed_ancestor("/usr/bin/env") is None
