"""The versioned library: the SQLite store (source of truth), its git mirror, and the promotion policy."""

from agentgrad.store.gitmirror import GitMirror
from agentgrad.store.promotion import Promotion
from agentgrad.store.sqlite import SQLiteStore

__all__ = ["GitMirror", "Promotion", "SQLiteStore"]
