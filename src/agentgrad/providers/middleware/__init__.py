"""Middleware: composable layers, each itself a `Provider`.

A sound stack, outermost first: `FatalLatch` -> `Cache` -> `Retry` -> `CircuitBreaker` -> `RateLimit` ->
`ConcurrencyLimit` -> `Accounting` -> provider. Exactly one `Retry` per stack, and nothing above it retries again.

>>> stack = wrap(provider, lambda p: Accounting(p, meter), lambda p: ConcurrencyLimit(p, 16),
...              lambda p: CircuitBreaker(p), lambda p: Retry(p))
"""

from agentgrad.providers.middleware.accounting import DEFAULT_PRICES, Accounting, Meter, Prices, Tally, price_of
from agentgrad.providers.middleware.base import Middleware, layers, wrap
from agentgrad.providers.middleware.breaker import CircuitBreaker
from agentgrad.providers.middleware.cache import Cache
from agentgrad.providers.middleware.latch import FatalLatch
from agentgrad.providers.middleware.limits import ConcurrencyLimit, RateLimit
from agentgrad.providers.middleware.retry import Retry
from agentgrad.providers.middleware.tracing import Traced

__all__ = [
    "DEFAULT_PRICES", "Accounting", "Cache", "CircuitBreaker", "ConcurrencyLimit", "FatalLatch", "Meter", "Middleware",
    "Prices",
    "RateLimit", "Retry", "Tally", "Traced", "layers", "price_of", "wrap",
]
