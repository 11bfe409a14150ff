"""Fakes and simulated worlds for tests and benchmarks: a fake clock and the reference world."""

from agentgrad.testing.clock import FakeClock
from agentgrad.testing.world import Proposal, ReferenceWorld, WorldConfig, WorldTask

__all__ = ["FakeClock", "Proposal", "ReferenceWorld", "WorldConfig", "WorldTask"]
