"""`OtelSpans`: a callback that turns a run's events into OpenTelemetry spans (run, calls, optimizer steps).

OpenTelemetry is an optional extra (``pip install 'agentgrad[otel]'``); it is imported when the callback is made.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from agentgrad.errors import ConfigError

if TYPE_CHECKING:
    from opentelemetry.trace import Span, TracerProvider
    from opentelemetry.util.types import AttributeValue

# Run events that become span events on the run span (each is rare: at most a few per run).
_RUN_EVENTS = ("resumed", "idle", "promotion", "repair")


def error_type(error: str) -> str:
    """A short, low-cardinality kind for a call's error text: the exception type name ("ValueError: ..."),
    "timeout", "cancelled", or "error"."""
    head = error.split(":", 1)[0]
    if ":" in error and head.isidentifier():
        return head
    if error.startswith("timed out"):
        return "timeout"
    return "cancelled" if error == "cancelled" else "error"


def attributes(prefix: str, value: Any) -> dict[str, AttributeValue]:
    """Nested mappings as dotted attribute keys under `prefix`; None leaves are left out (OTel has no null),
    numbers, strings and booleans are kept, anything else becomes JSON text."""
    if isinstance(value, Mapping):
        out: dict[str, AttributeValue] = {}
        for key, item in value.items():
            out.update(attributes(f"{prefix}.{key}", item))
        return out
    if value is None:
        return {}
    if isinstance(value, (str, bool, int, float)):
        return {prefix: value}
    return {prefix: json.dumps(value, default=str)}


class OtelSpans:
    """Traces a run: pass it in `evolve(..., callbacks=[spans])`.

    Spans, all in one trace per session of the run:
    - ``agentgrad.run``: from `started` to `finished`, with the configuration, budget and split sizes, the
      outcome (test and baseline rewards) and, at the end, how many calls, proposals and verdicts of each kind
      the session saw. ERROR if the run failed. Rare events (resumed, idle, promotion, repair) are span events.
    - ``agentgrad.rollouts`` / ``agentgrad.proposals`` / ``agentgrad.gate_evals``: one per call of a user
      function, children of the run span, timed from the call's end back over its duration; attributes
      `agentgrad.task`, `agentgrad.call`, `agentgrad.tokens`, `agentgrad.cost`; ERROR with the error text if
      the call failed.
    - ``agentgrad.step``: one per optimizer step, from its inputs to its last verdict, with a span event per
      decision and per commit.

    Args:
        tracer_provider: the provider to trace with (None: OpenTelemetry's global provider).
        clock: wall time in nanoseconds since the epoch (span times).
    State: the open run and step spans and the session's counts. Not thread-safe: callbacks are called from the
    run's event loop. Use a `BatchSpanProcessor` in production, so exporting never blocks the run.
    `close()` (or leaving a `with` block) ends spans a run left open (a run that never reached `finished`).
    """

    def __init__(self, tracer_provider: TracerProvider | None = None, *,
                 clock: Callable[[], int] = time.time_ns) -> None:
        try:
            from opentelemetry import trace
        except ImportError as exc:
            raise ConfigError("OtelSpans needs OpenTelemetry: pip install 'agentgrad[otel]'") from exc
        self._trace = trace
        self.tracer = trace.get_tracer("agentgrad", tracer_provider=tracer_provider)
        self.clock = clock
        self.run_span: Span | None = None
        self.step_span: Span | None = None
        self.counts: Counter[str] = Counter()
        self._error: str | None = None
        self._handlers: dict[str, Callable[[Mapping[str, Any]], None]] = {
            "call": self._on_call, "proposal": self._on_proposal, "proposal_failed": self._on_proposal_failed,
            "step": self._on_step, "decision": self._on_decision, "commit": self._on_commit,
            "step_done": self._on_step_done, "failed": self._on_failed, "finished": self._on_finished,
            **{kind: self._on_run_event(kind) for kind in _RUN_EVENTS}}

    def __call__(self, kind: str, payload: Mapping[str, Any]) -> None:
        if kind == "started":
            self._started(payload)
            return
        handler = self._handlers.get(kind)
        if handler is None:
            return
        if self.run_span is None:
            raise ValueError(f"OtelSpans got a {kind!r} event outside a run (no 'started' event before it)")
        handler(payload)

    def _on_run_event(self, kind: str) -> Callable[[Mapping[str, Any]], None]:
        def record(payload: Mapping[str, Any]) -> None:
            assert self.run_span is not None
            self.run_span.add_event(kind, attributes("agentgrad", dict(payload)), timestamp=self.clock())
        return record

    def _child(self, name: str, start: int, attrs: Mapping[str, AttributeValue]) -> Span:
        assert self.run_span is not None
        parent = self._trace.set_span_in_context(self.run_span)
        return self.tracer.start_span(name, context=parent, attributes=attrs, start_time=start)

    def _started(self, payload: Mapping[str, Any]) -> None:
        self.close()
        self.counts, self._error = Counter(), None
        attrs = {"agentgrad.run_dir": str(payload["run_dir"]), "agentgrad.artifact": str(payload["artifact"]),
                 "agentgrad.resuming": bool(payload["resuming"]), **attributes("agentgrad.config", payload["config"]),
                 **attributes("agentgrad.budget", payload["budget"]), **attributes("agentgrad.splits",
                                                                                    payload["splits"])}
        self.run_span = self.tracer.start_span("agentgrad.run", attributes=attrs, start_time=self.clock())

    def _on_call(self, payload: Mapping[str, Any]) -> None:
        stage = str(payload["stage"])
        end = self.clock()
        start = end - max(0, round(float(payload["seconds"]) * 1e9))
        span = self._child(f"agentgrad.{stage}", start, {
            "agentgrad.stage": stage, "agentgrad.call": int(payload["call"]), "agentgrad.task": str(payload["task"]),
            "agentgrad.tokens": float(payload["tokens"]), "agentgrad.cost": float(payload["cost"])})
        self.counts[f"calls.{stage}"] += 1
        if payload["error"] is not None:
            self.counts["calls.errors"] += 1
            span.set_attribute("error.type", error_type(str(payload["error"])))
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, str(payload["error"])))
        span.end(end_time=end)

    def _on_proposal(self, payload: Mapping[str, Any]) -> None:
        if "trimmed" in payload:  # the same diff again, its passengers taken out (`runtime.trim`)
            self.counts["proposals_trimmed_ops"] += len(payload["trimmed"])
        else:
            self.counts["proposals"] += 1

    def _on_proposal_failed(self, payload: Mapping[str, Any]) -> None:
        self.counts[f"proposals_unusable.{payload['kind']}"] += 1

    def _on_step(self, payload: Mapping[str, Any]) -> None:
        self._end_step()
        self.step_span = self._child("agentgrad.step", self.clock(), {
            "agentgrad.step": int(payload["step"]), "agentgrad.head": int(payload["head"]),
            "agentgrad.candidates": len(payload["candidates"])})

    def _on_decision(self, payload: Mapping[str, Any]) -> None:
        self.counts[f"decisions.{payload['outcome']}"] += 1
        if self.step_span is not None:  # verdicts reached outside a step (gate screen, unfinished) are counted only
            self.step_span.add_event("decision", {
                "agentgrad.diff_id": str(payload["diff_id"]), "agentgrad.outcome": str(payload["outcome"]),
                "agentgrad.stage": str(payload["stage"]), "agentgrad.reason": str(payload["reason"])},
                timestamp=self.clock())

    def _on_commit(self, payload: Mapping[str, Any]) -> None:
        self.counts["commits"] += 1
        if self.step_span is not None:
            self.step_span.add_event("commit", attributes("agentgrad", dict(payload)), timestamp=self.clock())

    def _on_step_done(self, payload: Mapping[str, Any]) -> None:
        self.counts["steps"] += 1
        if self.step_span is not None:
            self.step_span.set_attribute("agentgrad.versions", [int(v) for v in payload["versions"]])
            self.step_span.set_attribute("agentgrad.held", len(payload["held"]))
        self._end_step()

    def _on_failed(self, payload: Mapping[str, Any]) -> None:
        assert self.run_span is not None
        self._error = str(payload["error"])
        self.run_span.add_event("failed", {"agentgrad.error": self._error}, timestamp=self.clock())

    def _on_finished(self, payload: Mapping[str, Any]) -> None:
        assert self.run_span is not None
        span = self.run_span
        span.set_attributes(attributes("agentgrad", {"ok": bool(payload["ok"]), "test_reward": payload["test_reward"],
                                                     "baseline": payload["baseline"]}))
        if payload["ok"]:
            span.set_status(self._trace.StatusCode.OK)
        else:
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, self._error or "the run failed"))
        self._end_run()

    def _end_step(self) -> None:
        if self.step_span is not None:
            self.step_span.end(end_time=self.clock())
            self.step_span = None

    def _end_run(self) -> None:
        self._end_step()
        if self.run_span is not None:
            self.run_span.set_attributes({f"agentgrad.count.{k}": v for k, v in sorted(self.counts.items())})
            self.run_span.end(end_time=self.clock())
            self.run_span = None

    def close(self) -> None:
        """End the spans of a run that never reached `finished` (the run span is marked unfinished)."""
        if self.run_span is not None:
            self.run_span.set_attribute("agentgrad.unfinished", True)
        self._end_run()

    def __enter__(self) -> OtelSpans:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
