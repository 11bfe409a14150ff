"""The versioned library of a run directory: the SQLite store (the source of truth), its event log, its git mirror
and the promotion policy.

`Store` is the port (a protocol) and `SQLiteStore` its embedded backend; `commit_step` writes one optimizer step
to a store. `EventLog` holds the run's `Event`s; `GitMirror` mirrors the store into a git repository;
`Promotion` decides when to try moving the stable branch up to dev. The other modules here are internal.

Each name here imports its module when first used (PEP 562): reading an event log loads neither dulwich (the git
mirror's) nor numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentgrad._lazy import lazy_names

if TYPE_CHECKING:
    from agentgrad.store.commit import commit_step
    from agentgrad.store.events import Event, EventLog
    from agentgrad.store.gitmirror import GitMirror
    from agentgrad.store.promotion import Promotion
    from agentgrad.store.protocol import Store
    from agentgrad.store.sqlite import SQLiteStore

_LAZY = {
    "commit_step": "agentgrad.store.commit", "Event": "agentgrad.store.events", "EventLog": "agentgrad.store.events",
    "GitMirror": "agentgrad.store.gitmirror", "Promotion": "agentgrad.store.promotion",
    "Store": "agentgrad.store.protocol", "SQLiteStore": "agentgrad.store.sqlite",
}


__getattr__ = lazy_names(__name__, _LAZY)


__all__ = ["Event", "EventLog", "GitMirror", "Promotion", "SQLiteStore", "Store", "commit_step"]
