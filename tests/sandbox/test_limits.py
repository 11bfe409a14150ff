"""`Limits` validates what it is given and maps to the resource limits a run sets."""

from __future__ import annotations

import math
from typing import Any

import pytest

from agentgrad.errors import AgentgradError, ConfigError
from agentgrad.sandbox import Limits, SandboxConfigError


def test_the_defaults_are_valid_and_bounded() -> None:
    limits = Limits()
    assert limits.cpu_seconds > 0 and limits.wall_seconds > limits.cpu_seconds
    assert 0 < limits.output_bytes < limits.memory_bytes


def test_each_limit_maps_to_its_rlimit() -> None:
    limits = Limits(cpu_seconds=2, memory_bytes=300 << 20, file_bytes=5 << 20, processes=7)
    rlimits = {name: (soft, hard) for name, soft, hard in limits.rlimits()}
    assert rlimits == {"RLIMIT_CPU": (2, 3), "RLIMIT_AS": (300 << 20, 300 << 20),
                       "RLIMIT_FSIZE": (5 << 20, 5 << 20), "RLIMIT_NPROC": (7, 7), "RLIMIT_CORE": (0, 0)}
    assert dict((name, soft) for name, soft, _ in limits.rlimits(extra_processes=2))["RLIMIT_NPROC"] == 9


@pytest.mark.parametrize(("field", "value"), [
    ("cpu_seconds", 0), ("cpu_seconds", -1), ("cpu_seconds", 1.5), ("cpu_seconds", True),
    ("memory_bytes", 0), ("memory_bytes", "1G"), ("file_bytes", -5), ("processes", 0),
    ("wall_seconds", 0.0), ("wall_seconds", math.inf), ("wall_seconds", math.nan), ("output_bytes", None),
])
def test_a_bad_limit_is_refused_with_its_name(field: str, value: Any) -> None:
    with pytest.raises(SandboxConfigError, match=f"Limits.{field}") as caught:
        Limits(**{field: value})
    assert isinstance(caught.value, ConfigError) and isinstance(caught.value, AgentgradError)


def test_limits_are_frozen_values() -> None:
    limits = Limits(wall_seconds=2)
    assert limits == Limits(wall_seconds=2) and hash(limits) == hash(Limits(wall_seconds=2))
    with pytest.raises(AttributeError):
        limits.cpu_seconds = 5  # type: ignore[misc]
