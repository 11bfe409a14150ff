"""`TraceLog`: what a recipe saw of the run, through its own `run` and `reward` (no engine internals).

A recipe's agent wraps the solver and the reward: each call of `run` records which text the agent saw on which
task and what it answered, and each call of `reward` scores that answer. So a recipe knows, for every text the run
tried (the head on rollouts, candidates on gate calls), its outputs and scores per task: GEPA's reflective
minibatches and Pareto scores, OPRO's scored history and Meta-Harness's raw traces are read from here. Bounded: the
oldest texts are forgotten first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentgrad.core.artifact import content_hash
from agentgrad.errors import StateDictError


@dataclass(frozen=True)
class Trace:
    """One call: the task, what the agent answered with the text, and the score (None until scored)."""

    task_id: str
    output: str
    score: float | None = None


class TraceLog:
    """Per text (by content hash), the latest trace on each task.

    Args:
        texts: how many texts to remember (least recently seen forgotten first).
    State: the texts and their traces (`state_dict`).
    """

    def __init__(self, texts: int = 512) -> None:
        self.limit = texts
        self._texts: OrderedDict[str, str] = OrderedDict()
        self._traces: dict[str, dict[str, Trace]] = {}
        self._pending: dict[tuple[str, str], str] = {}  # (task id, output) -> the text that produced it

    def ran(self, text: str, task_id: str, output: str) -> None:
        """`run` answered `output` on `task_id` with `text` (scored when the reward comes)."""
        key = content_hash(text)
        self._texts[key] = text
        self._texts.move_to_end(key)
        self._traces.setdefault(key, {})[task_id] = Trace(task_id, output)
        self._pending[(task_id, output)] = key
        while len(self._texts) > self.limit:
            old, _ = self._texts.popitem(last=False)
            self._traces.pop(old, None)
        if len(self._pending) > 4 * self.limit:
            self._pending.clear()  # unscored leftovers of forgotten texts

    def scored(self, task_id: str, output: str, score: float) -> None:
        """The reward scored `output` on `task_id`."""
        key = self._pending.pop((task_id, output), None)
        if key is None or key not in self._traces:
            return
        self._traces[key][task_id] = Trace(task_id, output, float(score))

    def scores(self, text: str) -> dict[str, float]:
        """The known score of `text` on each task."""
        traces = self._traces.get(content_hash(text), {})
        return {t: trace.score for t, trace in traces.items() if trace.score is not None}

    def traces(self, text: str) -> list[Trace]:
        """The scored traces of `text`, in the order they came."""
        return [t for t in self._traces.get(content_hash(text), {}).values() if t.score is not None]

    def text(self, key: str) -> str | None:
        """The text with content hash `key`, if remembered."""
        return self._texts.get(key)

    def state_dict(self) -> dict[str, Any]:
        return {"texts": dict(self._texts),
                "traces": {k: [[t.task_id, t.output, t.score] for t in v.values()] for k, v in self._traces.items()}}

    def load_state_dict(self, data: Mapping[str, Any]) -> None:
        texts, traces = data.get("texts"), data.get("traces")
        if not isinstance(texts, Mapping) or not isinstance(traces, Mapping):
            raise StateDictError("trace log: 'texts' and 'traces' must be dicts")
        try:
            loaded = {k: {str(t): Trace(str(t), str(o), None if s is None else float(s)) for t, o, s in v}
                      for k, v in traces.items()}
        except (TypeError, ValueError) as exc:
            raise StateDictError(f"trace log: malformed traces ({exc})") from exc
        self._texts = OrderedDict((str(k), str(v)) for k, v in texts.items())
        self._traces = loaded
        self._pending = {}
