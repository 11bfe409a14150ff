"""Fakes and simulated worlds for tests and benchmarks: a fake clock and the reference world."""

from agentgrad.testing.clock import FakeClock
from agentgrad.testing.world import ReferenceWorld, WorldConfig, WorldProposal, WorldTask

__all__ = ["FakeClock", "ReferenceWorld", "WorldConfig", "WorldProposal", "WorldTask"]
