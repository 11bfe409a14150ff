"""Shared sandbox fixtures: what this machine can isolate, and small fast limits.

Tests that need isolation skip (saying what is missing) where the namespaces cannot be made; on Linux as root or
with unprivileged user namespaces, all of them run.
"""

from __future__ import annotations

import pytest

from agentgrad.sandbox import Isolation, Limits, Sandbox, probe_isolation

# CPU time accrues more slowly than wall time on a loaded machine: the wall clock is far off, so a CPU test always
# hits the CPU limit first (the wall-clock test sets its own)
FAST = Limits(cpu_seconds=1, memory_bytes=256 << 20, file_bytes=1 << 20, processes=8, wall_seconds=30.0,
              output_bytes=64 << 10)


@pytest.fixture(scope="session")
def isolation() -> Isolation:
    return probe_isolation()


@pytest.fixture
def isolated(isolation: Isolation) -> Isolation:
    """The machine's isolation; the test skips (with the reason) where it is incomplete."""
    if not (isolation.network and isolation.filesystem):
        pytest.skip(f"this machine cannot make the sandbox's namespaces: {isolation.reason}")
    return isolation


@pytest.fixture
def sandbox(isolated: Isolation) -> Sandbox:
    return Sandbox(FAST)
