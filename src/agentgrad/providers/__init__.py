"""LLM providers: one async protocol (`Provider.complete`), a sync façade, and middleware layers.

Providers: `OpenAICompatible` (OpenAI, DeepSeek, vLLM, llama.cpp, Ollama), `Anthropic` (official SDK, optional),
`CommandAgent` (a command-line agent), `CallableProvider` (a function). Providers never retry; errors follow one
taxonomy (`ProviderError` and its subclasses, each `transient` or permanent) and `Retry` owns retries.
"""

from agentgrad.providers.anthropic import Anthropic
from agentgrad.providers.base import Completion, Message, MessageLike, Provider, Usage, as_messages, clean_text
from agentgrad.providers.callable import CallableProvider
from agentgrad.providers.cli import CommandAgent
from agentgrad.providers.errors import (
    AuthError,
    BadRequestError,
    CircuitOpen,
    CommandFailed,
    ConnectionLost,
    InvalidMessageError,
    MalformedResponse,
    NotFoundError,
    ProviderError,
    ProviderTimeout,
    RateLimitError,
    ServerError,
    SyncInLoopError,
)
from agentgrad.providers.local import LocalModel, LocalStats, local
from agentgrad.providers.middleware import (
    DEFAULT_PRICES,
    Accounting,
    Cache,
    CircuitBreaker,
    ConcurrencyLimit,
    FatalLatch,
    Meter,
    RateLimit,
    Retry,
    Tally,
    wrap,
)
from agentgrad.providers.openai_compat import OpenAICompatible
from agentgrad.providers.sync import complete, complete_sync
from agentgrad.providers.weights import LocalUnavailableError, WeightsMismatchError

__all__ = [
    "DEFAULT_PRICES",
    "Accounting",
    "Anthropic",
    "AuthError",
    "BadRequestError",
    "Cache",
    "CallableProvider",
    "CircuitBreaker",
    "CircuitOpen",
    "CommandAgent",
    "CommandFailed",
    "Completion",
    "ConcurrencyLimit",
    "ConnectionLost",
    "FatalLatch",
    "InvalidMessageError",
    "LocalModel",
    "LocalStats",
    "LocalUnavailableError",
    "MalformedResponse",
    "Message",
    "MessageLike",
    "Meter",
    "NotFoundError",
    "OpenAICompatible",
    "Provider",
    "ProviderError",
    "ProviderTimeout",
    "RateLimit",
    "RateLimitError",
    "Retry",
    "ServerError",
    "SyncInLoopError",
    "Tally",
    "Usage",
    "WeightsMismatchError",
    "as_messages",
    "clean_text",
    "complete",
    "complete_sync",
    "local",
    "wrap",
]
