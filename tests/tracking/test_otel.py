"""OpenTelemetry spans for a run: one run span, a span per call by stage, a span per optimizer step."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from agentgrad.errors import ConfigError
from agentgrad.testing.clock import FakeClock
from agentgrad.tracking import OtelSpans
from agentgrad.tracking.otel import attributes, error_type
from tests.runtime.helpers import agent, dispatched, events, run


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> TracerProvider:
    """A private tracer provider (the global one is never touched) that keeps finished spans in memory."""
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    return tracer_provider


def named(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def started(run_dir: Path) -> dict[str, Any]:
    return {"run_dir": str(run_dir), "artifact": "skill", "resuming": False,
            "config": {"workers": {"rollout": 2}, "asynchronous": True}, "budget": {"rollouts": 10, "cost": None},
            "splits": {"train": 3, "val": 2}}


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_run_gives_one_span_per_call_by_stage_under_one_run_span(tmp_path: Path, provider: TracerProvider,
                                                                  exporter: InMemorySpanExporter,
                                                                  asynchronous: bool) -> None:
    with OtelSpans(provider) as spans:
        result = run(tmp_path, agent(), asynchronous=asynchronous, callbacks=[spans])
    finished = exporter.get_finished_spans()
    (root,) = named(finished, "agentgrad.run")
    assert root.parent is None and root.status.status_code is StatusCode.OK
    assert root.attributes is not None and root.attributes["agentgrad.config.workers.rollout"] == 4
    assert root.attributes["agentgrad.test_reward"] == result.test_reward
    calls = Counter(s.name for s in finished if s.name.startswith("agentgrad.") and s.name not in (
        "agentgrad.run", "agentgrad.step"))
    assert calls == {f"agentgrad.{stage}": n for stage, n in dispatched(tmp_path).items()}
    assert all(s.parent is not None and s.parent.span_id == root.context.span_id for s in finished if s is not root)
    assert all(s.context.trace_id == root.context.trace_id for s in finished)
    steps = named(finished, "agentgrad.step")
    assert len(steps) == len(events(tmp_path, ["step_done"])) > 0
    commits = [e for s in steps for e in s.events if e.name == "commit"]
    assert len(commits) == len(result.history) - 1


def test_a_call_span_ends_now_and_starts_its_duration_earlier_and_an_error_sets_error_status(
        tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    clock = FakeClock(start=1000.0)
    spans = OtelSpans(provider, clock=lambda: round(clock.now() * 1e9))
    spans("started", started(tmp_path))
    clock.advance(5.0)
    spans("call", {"call": 7, "stage": "gate_evals", "task": "t3", "error": "ValueError: bad output",
                   "seconds": 1.5, "end": 5.0, "tokens": 12.0, "cost": 0.25})
    (span,) = exporter.get_finished_spans()
    assert span.name == "agentgrad.gate_evals"
    assert (span.start_time, span.end_time) == (1_003_500_000_000, 1_005_000_000_000)
    assert span.attributes is not None
    assert (span.attributes["agentgrad.call"], span.attributes["agentgrad.task"]) == (7, "t3")
    assert (span.attributes["agentgrad.tokens"], span.attributes["agentgrad.cost"]) == (12.0, 0.25)
    assert span.attributes["error.type"] == "ValueError"
    assert span.status.status_code is StatusCode.ERROR and span.status.description == "ValueError: bad output"


def test_a_failed_run_span_has_error_status_with_the_error(tmp_path: Path, provider: TracerProvider,
                                                           exporter: InMemorySpanExporter) -> None:
    def broken(task: Any, output: str) -> float:
        raise KeyError("grader bug")

    spans = OtelSpans(provider)
    result = run(tmp_path, agent(), asynchronous=False, reward=broken, callbacks=[spans])
    assert not result.ok and spans.run_span is None
    (root,) = named(exporter.get_finished_spans(), "agentgrad.run")
    assert root.status.status_code is StatusCode.ERROR
    assert root.status.description is not None and root.status.description.startswith("RewardError")
    assert [e.name for e in root.events] == ["failed"]


def test_closing_an_unfinished_run_ends_its_spans_marked_unfinished(tmp_path: Path, provider: TracerProvider,
                                                                   exporter: InMemorySpanExporter) -> None:
    spans = OtelSpans(provider)
    spans("started", started(tmp_path))
    spans("step", {"step": 0, "now": 0.0, "head": 0, "head_hash": "h", "candidates": []})
    spans.close()
    assert [s.name for s in exporter.get_finished_spans()] == ["agentgrad.step", "agentgrad.run"]
    root = named(exporter.get_finished_spans(), "agentgrad.run")[0]
    assert root.attributes is not None and root.attributes["agentgrad.unfinished"] is True
    with pytest.raises(ValueError, match="outside a run"):
        spans("call", {"call": 0})


def test_attributes_flatten_mappings_drop_nones_and_keep_primitives() -> None:
    assert attributes("a", {"b": {"c": 1}, "d": None, "e": [1, "x"], "f": True}) == {
        "a.b.c": 1, "a.e": '[1, "x"]', "a.f": True}


def test_error_types_are_short_kinds() -> None:
    assert [error_type(e) for e in ("KeyError: 'x'", "timed out after 5 s", "cancelled",
                                    "run returned None, expected a string")] == [
        "KeyError", "timeout", "cancelled", "error"]


def test_a_missing_opentelemetry_raises_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    with pytest.raises(ConfigError, match=r"agentgrad\[otel\]"):
        OtelSpans()
