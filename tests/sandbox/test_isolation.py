"""Where the namespaces cannot be made, the sandbox says so and refuses to run code rather than run it unisolated.

The refusals are shown with real `unshare` stand-ins that fail the way a locked-down machine does; the last test
asserts whichever branch this machine is on.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from agentgrad.errors import AgentgradError, ConfigError, SystemicError
from agentgrad.sandbox import (
    Isolation,
    IsolationUnavailableError,
    NetworkIsolationError,
    Sandbox,
    SandboxConfigError,
    SandboxError,
    probe_isolation,
)
from tests.sandbox.conftest import FAST


def _fake_unshare(folder: Path, script: str) -> str:
    path = folder / "unshare"
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(0o755)
    return str(path)


def test_without_unshare_network_sensitive_code_is_refused(tmp_path: Path) -> None:
    sandbox = Sandbox(FAST, unshare=str(tmp_path / "no-such-unshare"))
    assert not sandbox.isolation.network and not sandbox.isolation.filesystem
    assert "unshare" in sandbox.isolation.reason
    with pytest.raises(NetworkIsolationError, match=r"no network namespace can be made.*refused"):
        sandbox.run_python("print('never runs')")


def test_when_namespaces_are_forbidden_the_reason_is_the_kernels(tmp_path: Path) -> None:
    fake = _fake_unshare(tmp_path, "echo 'unshare: unshare failed: Operation not permitted' >&2\nexit 1")
    isolation = probe_isolation(fake)
    assert (isolation.network, isolation.filesystem) == (False, False)
    assert "Operation not permitted" in isolation.reason
    with pytest.raises(NetworkIsolationError, match="Operation not permitted"):
        Sandbox(FAST, unshare=fake).run("true")


def test_code_allowed_the_network_is_still_refused_without_a_mount_namespace(tmp_path: Path) -> None:
    fake = _fake_unshare(tmp_path, 'case "$*" in *--mount*) echo "mount: denied" >&2; exit 1;; esac\nexit 0')
    isolation = probe_isolation(fake)
    assert (isolation.network, isolation.filesystem) == (True, False)
    with pytest.raises(IsolationUnavailableError, match="writes outside the working directory") as caught:
        Sandbox(FAST, network=True, unshare=fake).run("true")
    assert not isinstance(caught.value, NetworkIsolationError)


def test_only_the_network_namespace_missing_refuses_only_network_sensitive_code(tmp_path: Path) -> None:
    fake = _fake_unshare(tmp_path, 'case "$*" in *--net*) echo "net: denied" >&2; exit 1;; esac\nexit 0')
    isolation = probe_isolation(fake)
    assert (isolation.network, isolation.filesystem) == (False, True)
    assert isolation.require(network=True) == fake
    with pytest.raises(NetworkIsolationError, match="net: denied"):
        isolation.require(network=False)


def test_the_errors_are_typed() -> None:
    assert issubclass(NetworkIsolationError, IsolationUnavailableError)
    assert issubclass(IsolationUnavailableError, SandboxError) and issubclass(SandboxError, SystemicError)
    assert issubclass(SandboxConfigError, SandboxError) and issubclass(SandboxConfigError, ConfigError)
    assert issubclass(SandboxError, AgentgradError)


def test_this_machine_either_isolates_or_refuses(isolation: Isolation) -> None:
    sandbox = Sandbox(FAST)
    if isolation.network and isolation.filesystem:
        result = sandbox.run_python("print('isolated')")
        assert result.ok and result.stdout == "isolated\n"
        assert isolation.drops_user == (os.geteuid() == 0)
    else:
        with pytest.raises(IsolationUnavailableError):
            sandbox.run_python("print('isolated')")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox's namespaces are Linux's")
def test_as_root_on_linux_the_full_isolation_is_available(isolation: Isolation) -> None:
    if os.geteuid() != 0:
        pytest.skip("not root: isolation goes through a user namespace, which this machine may forbid")
    assert isolation.network and isolation.filesystem and isolation.drops_user, isolation.reason
