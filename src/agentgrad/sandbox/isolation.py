"""Whether this machine can isolate sandboxed code, and how: Linux namespaces made by util-linux `unshare`.

As root, the code runs in new mount, PID, network, IPC and UTS namespaces as a fresh unprivileged user. Otherwise
the same namespaces are made inside a user namespace, and the code runs as you with no capabilities.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from dataclasses import dataclass

from agentgrad.sandbox.errors import IsolationUnavailableError, NetworkIsolationError

# Fresh users come from a range no distribution or container tool hands out (systemd's "unused" range).
UID_BASE = 0x7000_0000
UID_SPAN = 0x0800_0000
_PROBE_PATH = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
_FILESYSTEM_FLAGS = ("--mount", "--pid", "--fork", "--mount-proc", "--ipc", "--uts")


@dataclass(frozen=True)
class Isolation:
    """What the sandbox can make here.

    Args:
        unshare: the `unshare` binary, or None when there is none.
        user_namespace: namespaces are made inside a user namespace (we are not root): the code runs as you, with
            no capabilities, instead of as a fresh user.
        network: a network namespace can be made (the code sees only a loopback that is down).
        filesystem: mount and PID namespaces can be made (a read-only view of the files; no other processes).
        reason: what is missing, or "" when everything is there.
    """

    unshare: str | None
    user_namespace: bool
    network: bool
    filesystem: bool
    reason: str = ""

    @property
    def drops_user(self) -> bool:
        """The code runs as a fresh unprivileged user, so file permissions also guard the host's files."""
        return self.filesystem and not self.user_namespace

    def require(self, *, network: bool) -> str:
        """The `unshare` binary, after checking that code with (`network=True`) or without the network can run."""
        if not network and not self.network:
            raise NetworkIsolationError(
                f"no network namespace can be made here ({self.reason}); code that must not reach the network "
                "(Sandbox(network=False)) is refused. Pass network=True only for code that may use the network.")
        if not self.filesystem or self.unshare is None:
            raise IsolationUnavailableError(
                f"no mount and PID namespaces can be made here ({self.reason}), so writes outside the working "
                "directory could not be stopped: the sandbox refuses to run code")
        return self.unshare

    def unshare_flags(self, *, network: bool) -> tuple[str, ...]:
        """The `unshare` options of a run."""
        user = ("--user", "--map-root-user") if self.user_namespace else ()
        net = () if network else ("--net",)
        return (*user, *_FILESYSTEM_FLAGS, "--kill-child", *net)


def probe_isolation(unshare: str | None = None) -> Isolation:
    """Try the namespaces the sandbox needs (two short `unshare` runs) and say what works.

    Args:
        unshare: the `unshare` binary to use; by default the one on PATH.
    """
    if not sys.platform.startswith("linux"):
        return Isolation(None, False, False, False, f"namespaces need Linux, this is {sys.platform}")
    found = unshare or shutil.which("unshare")
    if found is None or not os.access(found, os.X_OK):
        return Isolation(None, False, False, False, f"no util-linux `unshare` at {unshare or 'PATH'}")
    user = os.geteuid() != 0
    prefix = (found, "--user", "--map-root-user") if user else (found,)
    filesystem = _fails((*prefix, *_FILESYSTEM_FLAGS, "true"))
    network = _fails((*prefix, "--net", "true"))
    reason = "; ".join(f"{what}: {why}" for what, why in (("mount/PID namespaces", filesystem),
                                                            ("network namespace", network)) if why)
    return Isolation(found, user, network is None, filesystem is None, reason)


def fresh_uid() -> int:
    """A user id (also used as the group id) that no account and no other run has, for one run."""
    return UID_BASE + secrets.randbelow(UID_SPAN)


def _fails(argv: tuple[str, ...]) -> str | None:
    """Why `argv` failed, or None when it exited with status 0."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10, env=_PROBE_PATH, cwd="/",
                              stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return str(error)
    if done.returncode == 0:
        return None
    return done.stderr.strip() or f"exit status {done.returncode}"
