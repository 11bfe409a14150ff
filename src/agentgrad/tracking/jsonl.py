"""`JsonlEvents`: a callback that appends every run event to a JSON Lines file, one object per line."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO


class JsonlEvents:
    """Writes each event as `{"kind": ..., "at": <clock>, **payload}` on its own line, flushed at once.

    Args:
        path: the file to append to (created with its folder if missing).
        kinds: only these event kinds (None: all of them).
        clock: the time stamp source (time.time by default).
    Use it as a context manager, or call `close()` when the run is over.
    """

    def __init__(self, path: str | Path, *, kinds: set[str] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.kinds, self.clock = kinds, clock
        self._file: TextIO | None = self.path.open("a", encoding="utf-8")
        self._lock = threading.Lock()
        self.written = 0

    def __call__(self, kind: str, payload: Mapping[str, Any]) -> None:
        if self.kinds is not None and kind not in self.kinds:
            return
        line = json.dumps({"kind": kind, "at": self.clock(), **payload}, ensure_ascii=True, default=str)
        with self._lock:
            if self._file is None:
                raise ValueError(f"JsonlEvents({self.path}) is closed")
            self._file.write(line + "\n")
            self._file.flush()
            self.written += 1

    def close(self) -> None:
        """Close the file (idempotent)."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def __enter__(self) -> JsonlEvents:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
