"""`Traced`: one OpenTelemetry span per completion, with GenAI-style attributes; errors recorded, never changed.

OpenTelemetry is an optional extra (``pip install 'agentgrad[otel]'``); it is imported when a `Traced` is made.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agentgrad.core._checks import is_number
from agentgrad.errors import ConfigError
from agentgrad.providers.base import Completion, Message, Provider
from agentgrad.providers.errors import ProviderError
from agentgrad.providers.middleware.base import Middleware, layers

if TYPE_CHECKING:
    from opentelemetry.trace import Span, TracerProvider
    from opentelemetry.util.types import AttributeValue

# Request params recorded on the span, as GenAI semantic-convention attribute names.
_REQUEST = {"temperature": "gen_ai.request.temperature", "max_tokens": "gen_ai.request.max_tokens",
            "top_p": "gen_ai.request.top_p", "seed": "gen_ai.request.seed"}


def default_model(provider: Provider) -> str:
    """The model the innermost provider asks for when a call names none ("" if it does not say)."""
    innermost = list(layers(provider))[-1]
    model = getattr(innermost, "model", "")
    return model if isinstance(model, str) else ""


def request_attributes(name: str, model: str, messages: Sequence[Message],
                       params: dict[str, Any]) -> dict[str, AttributeValue]:
    """The span attributes known before the call: operation, provider name, requested model, sampling params.

    Message contents are never recorded (they may hold private data); only how many messages there are.
    """
    attrs: dict[str, AttributeValue] = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": name,
                                        "agentgrad.messages": len(messages)}
    if model:
        attrs["gen_ai.request.model"] = model
    for param, key in _REQUEST.items():
        value = params.get(param)
        if is_number(value, finite=False):
            attrs[key] = value
    stop = params.get("stop")
    if isinstance(stop, str):
        attrs["gen_ai.request.stop_sequences"] = [stop]
    elif isinstance(stop, (list, tuple)) and all(isinstance(s, str) for s in stop):
        attrs["gen_ai.request.stop_sequences"] = list(stop)
    if "stream" in params:
        attrs["agentgrad.request.stream"] = bool(params["stream"])
    return attrs


def response_attributes(result: Completion) -> dict[str, AttributeValue]:
    """The span attributes of an answer: model, tokens, finish reason, latency, cost, cache hit."""
    attrs: dict[str, AttributeValue] = {
        "gen_ai.response.model": result.model, "gen_ai.usage.input_tokens": result.usage.input_tokens,
        "gen_ai.usage.output_tokens": result.usage.output_tokens, "agentgrad.latency": result.latency,
        "agentgrad.cost": result.usage.cost, "agentgrad.cached": result.cached}
    if result.finish_reason is not None:
        attrs["gen_ai.response.finish_reasons"] = [result.finish_reason]
    return attrs


def error_attributes(err: BaseException) -> dict[str, AttributeValue]:
    """The span attributes of a failure: `error.type` (the taxonomy kind, or the exception's class name), and
    for a `ProviderError` the HTTP status (or exit code), the URL path and the attempts made."""
    if not isinstance(err, ProviderError):
        return {"error.type": type(err).__qualname__}
    attrs: dict[str, AttributeValue] = {"error.type": err.kind, "agentgrad.attempts": err.attempts,
                                        "agentgrad.transient": err.transient}
    if err.status is not None:
        attrs["http.response.status_code"] = err.status
    if err.path:
        attrs["url.path"] = err.path
    return attrs


class Traced(Middleware):
    """Wraps each `complete` (streamed or not: streaming is a param) in a client span ``chat <model>``.

    The model is the call's `model` param, else the innermost provider's default model.

    The span carries GenAI-style attributes (`gen_ai.request.model`, `gen_ai.response.model`,
    `gen_ai.usage.input_tokens` / `output_tokens`, `gen_ai.response.finish_reasons`) and `agentgrad.latency`,
    `agentgrad.cost`, `agentgrad.cached`. A failure sets the span's status to ERROR, records the exception and
    its `error.type` (and HTTP status for a `ProviderError`), then re-raises it unchanged. A cancelled call ends
    its span with `error.type` "cancelled". The span is current while the inner layers run, so spans they make
    are its children.

    Where it sits decides what a span is: outside `Retry`, one span per call (a failure says how many attempts
    it made); inside `Retry`, one span per request sent.

    Args:
        inner: the provider.
        tracer_provider: the provider to trace with (None: OpenTelemetry's global provider).
    State: the tracer and the default model.
    """

    def __init__(self, inner: Provider, *, tracer_provider: TracerProvider | None = None) -> None:
        try:
            from opentelemetry import trace
        except ImportError as exc:
            raise ConfigError("Traced needs OpenTelemetry: pip install 'agentgrad[otel]'") from exc
        super().__init__(inner)
        self._trace = trace
        self.tracer = trace.get_tracer("agentgrad.providers", tracer_provider=tracer_provider)
        self.model = default_model(inner)

    async def complete(self, messages: Sequence[Message], **params: Any) -> Completion:
        """Call through inside a span; the answer's usage is recorded, an error recorded and re-raised."""
        model = str(params.get("model") or "") or self.model
        with self.tracer.start_as_current_span(f"chat {model}".strip(), kind=self._trace.SpanKind.CLIENT,
                                               attributes=request_attributes(self.name, model, messages, params),
                                               record_exception=False, set_status_on_exception=False) as span:
            try:
                result = await self.inner.complete(messages, **params)
            except Exception as err:
                self._failed(span, err)
                raise
            except BaseException as err:  # cancellation: not a failure of the provider, but the answer is lost
                cancelled = isinstance(err, asyncio.CancelledError)
                span.set_attribute("error.type", "cancelled" if cancelled else type(err).__qualname__)
                raise
            span.set_attributes(response_attributes(result))
            return result

    def _failed(self, span: Span, err: Exception) -> None:
        span.set_attributes(error_attributes(err))
        span.record_exception(err)
        span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, str(err)))
