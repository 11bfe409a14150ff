"""`Traced`: a span per completion with GenAI attributes; failures recorded on the span and re-raised unchanged."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from agentgrad.providers import AuthError, CallableProvider, Message, OpenAICompatible, Retry, ServerError
from agentgrad.providers.middleware.tracing import Traced
from tests.providers.fake_server import FakeServer
from tests.providers.helpers import USER, RecordingSleep

CHAT = (Message("system", "be brief"), Message("user", "hello there"))


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def tracer_provider(exporter: InMemorySpanExporter) -> TracerProvider:
    """A private tracer provider (the global one is never touched) that keeps finished spans in memory."""
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    return tracer_provider


def only(exporter: InMemorySpanExporter) -> ReadableSpan:
    (span,) = exporter.get_finished_spans()
    return span


def attrs(span: ReadableSpan) -> dict[str, Any]:
    assert span.attributes is not None
    return dict(span.attributes)


@pytest.mark.parametrize("stream", [False, True])
def test_a_completion_span_carries_the_request_the_answer_and_its_usage(
        server: FakeServer, tracer_provider: TracerProvider, exporter: InMemorySpanExporter, stream: bool) -> None:
    traced = Traced(OpenAICompatible(server.url + "/v1", model="ok"), tracer_provider=tracer_provider)
    result = asyncio.run(traced.complete(CHAT, model="ok", temperature=0, max_tokens=50, stream=stream))
    span = only(exporter)
    assert (span.name, span.kind, span.status.status_code) == ("chat ok", SpanKind.CLIENT, StatusCode.UNSET)
    got = attrs(span)
    assert got["gen_ai.request.model"] == got["gen_ai.response.model"] == result.model == "ok"
    assert (got["gen_ai.request.temperature"], got["gen_ai.request.max_tokens"]) == (0, 50)
    assert (got["gen_ai.usage.input_tokens"], got["gen_ai.usage.output_tokens"]) == (
        result.usage.input_tokens, result.usage.output_tokens) != (0, 0)
    assert got["gen_ai.response.finish_reasons"] == ("stop",)
    assert got["agentgrad.latency"] == result.latency > 0
    assert got["agentgrad.request.stream"] is stream and got["agentgrad.messages"] == 2
    assert all("hello" not in str(value) for value in got.values())  # message contents are never recorded


def test_a_server_error_outside_retry_is_one_error_span_with_status_and_attempts(
        server: FakeServer, tracer_provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    inner = Retry(OpenAICompatible(server.url + "/v1", model="err-500"), attempts=3, sleep=RecordingSleep())
    traced = Traced(inner, tracer_provider=tracer_provider)
    with pytest.raises(ServerError) as info:
        asyncio.run(traced.complete(USER))
    assert info.value.attempts == 3 == server.counts["err-500"]
    span = only(exporter)
    assert span.name == "chat err-500"  # no model param: the provider's default model
    assert span.status.status_code is StatusCode.ERROR and span.status.description == str(info.value)
    got = attrs(span)
    assert (got["error.type"], got["http.response.status_code"], got["agentgrad.attempts"]) == ("server", 500, 3)
    assert got["url.path"] == info.value.path and got["agentgrad.transient"] is True
    (event,) = span.events
    assert event.name == "exception" and event.attributes is not None
    assert event.attributes["exception.type"] == "agentgrad.providers.errors.ServerError"


def test_inside_retry_each_request_is_a_span_and_a_401_is_a_single_one(
        server: FakeServer, tracer_provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    def stack(model: str) -> Retry:
        traced = Traced(OpenAICompatible(server.url + "/v1", model=model), tracer_provider=tracer_provider)
        return Retry(traced, attempts=4, sleep=RecordingSleep())

    asyncio.run(stack("fail-2-then-ok").complete(USER, model="fail-2-then-ok"))
    statuses = [s.status.status_code for s in exporter.get_finished_spans()]
    assert statuses == [StatusCode.ERROR, StatusCode.ERROR, StatusCode.UNSET]
    exporter.clear()
    with pytest.raises(AuthError):
        asyncio.run(stack("err-401").complete(USER, model="err-401"))
    span = only(exporter)
    assert attrs(span)["error.type"] == "auth" and attrs(span)["http.response.status_code"] == 401


def test_any_other_exception_is_recorded_by_class_and_passes_through_as_the_same_object(
        tracer_provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    boom = KeyError("choices")

    def broken(messages: Sequence[Message], **params: Any) -> str:
        raise boom

    traced = Traced(CallableProvider(broken), tracer_provider=tracer_provider)
    with pytest.raises(KeyError) as info:
        asyncio.run(traced.complete(USER, model="m"))
    assert info.value is boom
    span = only(exporter)
    assert attrs(span)["error.type"] == "KeyError" and span.status.status_code is StatusCode.ERROR


def test_the_span_is_current_while_the_inner_provider_runs(tracer_provider: TracerProvider,
                                                           exporter: InMemorySpanExporter) -> None:
    seen: list[int] = []

    def answer(messages: Sequence[Message], **params: Any) -> str:
        seen.append(trace.get_current_span().get_span_context().span_id)
        return "ok"

    asyncio.run(Traced(CallableProvider(answer), tracer_provider=tracer_provider).complete(USER))
    assert seen == [only(exporter).context.span_id]


def test_a_cancelled_call_ends_its_span_marked_cancelled_and_stays_cancelled(
        tracer_provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    async def hang(messages: Sequence[Message], **params: Any) -> str:
        await asyncio.Event().wait()
        return "never"

    async def main() -> None:
        task = asyncio.create_task(Traced(CallableProvider(hang), tracer_provider=tracer_provider).complete(USER))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    span = only(exporter)
    assert attrs(span)["error.type"] == "cancelled" and span.status.status_code is StatusCode.UNSET
