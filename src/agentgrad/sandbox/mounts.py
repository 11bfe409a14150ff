"""The view of the files a run gets, planned by the parent and made by the launcher in the run's mount namespace.

Every mount is read-only except the working directory. On top of that, directories anyone could write to or that
hold other programs' state (`/tmp`, `/var/tmp`, `/run`, `/dev`) are covered by an empty read-only tmpfs, and so is
any directory the code's user could not enter on the way to what it must read (the interpreter under `/root`, say).
What the code needs from a covered directory is bound back at its own path: the interpreter, the working
directory, and the harmless devices (`/dev/null`, `/dev/zero`, `/dev/full`, `/dev/random`, `/dev/urandom`).
With its own network namespace, a run also gets its own sysfs (the host's would list the host's interfaces).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass

HIDDEN = ("/tmp", "/var/tmp", "/run", "/dev")
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
DEVICE_LINKS = (("/dev/fd", "/proc/self/fd"), ("/dev/stdin", "/proc/self/fd/0"), ("/dev/stdout", "/proc/self/fd/1"),
                ("/dev/stderr", "/proc/self/fd/2"))


@dataclass(frozen=True)
class MountPlan:
    """The mounts of one run, in the order the launcher makes them.

    Args:
        hide: directories covered by an empty tmpfs.
        expose: paths under `hide` bound back at their own path (read-only).
        writable: the working directory, bound at its own path and the one mount left writable.
        links: (link, target) symbolic links made in the covered `/dev`.
        sysfs: mount a new sysfs on `/sys`, so `/sys/class/net` shows the run's own network namespace.
    """

    hide: tuple[str, ...]
    expose: tuple[str, ...]
    writable: str
    links: tuple[tuple[str, str], ...]
    sysfs: bool = False


def plan_mounts(workdir: str, readable: Iterable[str], *, as_stranger: bool, own_network: bool) -> MountPlan:
    """The plan for a run in `workdir` that must read the paths in `readable`.

    Args:
        workdir: the working directory (it may itself lie under a covered directory).
        readable: paths the code must reach, such as the interpreter's prefixes.
        as_stranger: the code runs as a user that is neither owner nor group of any host file, so it can enter a
            directory only if "others" may; directories it could not enter are covered too.
    """
    paths = sorted({os.path.realpath(path) for path in readable})
    covered = {path for path in HIDDEN if os.path.isdir(path) and not os.path.islink(path)}
    if as_stranger:
        covered |= {blocked for blocked in map(_first_closed_ancestor, paths) if blocked is not None}
    hide = _outermost(covered)
    wanted = [*paths, *(device for device in DEVICES if os.path.exists(device))]
    expose = tuple(path for path in _outermost(wanted) if _under_any(path, hide))
    links = DEVICE_LINKS if "/dev" in hide else ()
    sysfs = own_network and os.path.isdir("/sys/class/net")
    return MountPlan(hide, expose, os.path.realpath(workdir), links, sysfs)


def _first_closed_ancestor(path: str) -> str | None:
    """The outermost directory above `path` that "others" may not enter, or None."""
    parts = path.strip("/").split("/")[:-1]
    for depth in range(1, len(parts) + 1):
        ancestor = "/" + "/".join(parts[:depth])
        if not os.stat(ancestor).st_mode & stat.S_IXOTH:
            return ancestor
    return None


def _outermost(paths: Iterable[str]) -> tuple[str, ...]:
    """The paths that lie under no other of them."""
    unique = sorted(set(paths))
    return tuple(path for path in unique if not _under_any(path, [other for other in unique if other != path]))


def _under_any(path: str, roots: Iterable[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)
