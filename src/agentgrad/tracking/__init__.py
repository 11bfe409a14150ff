"""Tracking as callbacks: objects you pass to `evolve(..., callbacks=[...])`, never parameters of the run."""

from agentgrad.tracking.jsonl import JsonlEvents

__all__ = ["JsonlEvents"]
