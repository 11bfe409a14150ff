"""`Meter` (running totals of calls, tokens and cost per model) and `Accounting` (the layer that feeds it).

Prices are a plain mapping model -> (USD per 1M input tokens, USD per 1M output tokens). Extend the defaults by
passing your own mapping, e.g. `{**DEFAULT_PRICES, "my-model": (0.5, 1.5)}`; nothing global is ever changed.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from types import MappingProxyType
from typing import Any

from agentgrad.core._checks import is_integer, is_number
from agentgrad.errors import ConfigError, StateDictError
from agentgrad.providers.base import Completion, Message, Provider, Usage
from agentgrad.providers.errors import ProviderError
from agentgrad.providers.middleware.base import Middleware

Prices = Mapping[str, tuple[float, float]]

# List prices (USD per million tokens) of a few common models, as published when this file was written.
# Prices change: check yours and pass your own table. Models not listed count tokens but no cost.
DEFAULT_PRICES: Prices = MappingProxyType({
    "qwen2.5-coder-0.5b": (0.0, 0.0),
    "smollm2-135m": (0.0, 0.0),
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "claude-sonnet-4-5": (3.00, 15.00),
    "claude-haiku-4-5": (1.00, 5.00),
})
# A dated or tagged variant of a listed model shares its price: gpt-4o-2024-08-06, claude-haiku-4-5@20251001.
_VARIANT = re.compile(r"(-\d{8}|-\d{4}-\d{2}-\d{2}|@\d{8}|-latest)$")


def price_of(prices: Prices, model: str) -> tuple[float, float] | None:
    """The (input, output) USD per 1M tokens of `model`: an exact entry, else the entry it is a dated variant of."""
    if model in prices:
        return prices[model]
    match = _VARIANT.search(model)
    return prices.get(model[:match.start()]) if match else None


def check_prices(prices: Prices) -> Prices:
    """`prices` if every entry is a pair of finite non-negative numbers; raises `ConfigError` naming the bad one."""
    for model, pair in prices.items():
        ok = isinstance(pair, tuple) and len(pair) == 2 and all(is_number(v, low=0) for v in pair)
        if not ok:
            raise ConfigError(f"price of {model!r} must be (usd per 1M input, usd per 1M output), got {pair!r}")
    return prices


@dataclass(frozen=True)
class Tally:
    """Counts for one model (or the total): billed calls, cache hits, tokens, cost, failures, unpriced calls."""

    calls: int = 0
    cached_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    errors: int = 0
    unpriced_calls: int = 0

    def __add__(self, other: Tally) -> Tally:
        return Tally(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(Tally)))


class Meter:
    """Running totals per model, shared by every `Accounting` layer that feeds it; the runtime's budget reads it.

    Cache hits are counted apart (`cached_calls`) and add no tokens or cost: they were not billed.
    State: a `Tally` per model and failure counts per error kind; `state_dict()` / `load_state_dict()`.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._models: dict[str, Tally] = {}
        self._errors: Counter[str] = Counter()

    def record(self, model: str, usage: Usage, *, cached: bool = False, priced: bool = True) -> None:
        """Count one successful call of `model`."""
        add = Tally(cached_calls=1) if cached else Tally(
            calls=1, input_tokens=usage.input_tokens, output_tokens=usage.output_tokens, cost=usage.cost,
            unpriced_calls=0 if priced else 1)
        with self._lock:
            self._models[model] = self._models.get(model, Tally()) + add

    def record_error(self, model: str, kind: str) -> None:
        """Count one failed call of `model` with an error of `kind` (e.g. "auth", "malformed")."""
        with self._lock:
            self._models[model] = self._models.get(model, Tally()) + Tally(errors=1)
            self._errors[kind] += 1

    @property
    def totals(self) -> Tally:
        """The sum over all models."""
        with self._lock:
            return sum(self._models.values(), Tally())

    @property
    def cost(self) -> float:
        """Total USD so far."""
        return self.totals.cost

    def by_model(self) -> dict[str, Tally]:
        """A copy of the per-model tallies."""
        with self._lock:
            return dict(self._models)

    def errors(self) -> dict[str, int]:
        """Failures counted per error kind."""
        with self._lock:
            return dict(self._errors)

    def state_dict(self) -> dict[str, Any]:
        """A JSON-ready copy of the state."""
        with self._lock:
            return {"version": 1, "models": {m: asdict(t) for m, t in self._models.items()},
                    "errors": dict(self._errors)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Replace the state with `state` (from `state_dict`); validates everything before changing anything."""
        models, errors = _parse_state(state)
        with self._lock:
            self._models, self._errors = models, Counter(errors)


def _parse_state(state: Mapping[str, Any]) -> tuple[dict[str, Tally], dict[str, int]]:
    if not isinstance(state, Mapping) or state.get("version") != 1 or set(state) != {"version", "models", "errors"}:
        raise StateDictError(f"Meter state must be {{version: 1, models, errors}}, got keys {sorted(state)!r}")
    models, errors = state["models"], state["errors"]
    if not isinstance(models, Mapping) or not isinstance(errors, Mapping):
        raise StateDictError("Meter state: models and errors must be mappings")
    names = {f.name for f in fields(Tally)}
    out: dict[str, Tally] = {}
    for model, raw in models.items():
        if not isinstance(raw, Mapping) or set(raw) != names or not all(_count(v, k == "cost") for k, v in raw.items()):
            raise StateDictError(f"Meter state: bad tally for model {model!r}: {raw!r}")
        out[str(model)] = Tally(raw["calls"], raw["cached_calls"], raw["input_tokens"], raw["output_tokens"],
                                float(raw["cost"]), raw["errors"], raw["unpriced_calls"])
    if not all(isinstance(k, str) and _count(v, False) for k, v in errors.items()):
        raise StateDictError(f"Meter state: errors must map kind -> count, got {errors!r}")
    return out, dict(errors)


def _count(value: Any, real: bool) -> bool:
    return is_number(value, low=0) if real else is_integer(value, low=0)


class Accounting(Middleware):
    """Prices each answer from `prices` and records it in `meter`; failures are recorded by kind.

    The answer's `usage.cost` is set from the table (by the model that answered, else the model asked for);
    a model missing from the table keeps the cost its provider reported and counts as unpriced.
    Place it innermost (right around the provider) so every billed request is counted, retries included.

    Args:
        inner: the provider; meter: the `Meter` to feed; prices: the price table (default `DEFAULT_PRICES`).
    """

    def __init__(self, inner: Provider, meter: Meter, prices: Prices = DEFAULT_PRICES) -> None:
        super().__init__(inner)
        self.meter = meter
        self.prices = check_prices(prices)

    async def complete(self, messages: Sequence[Message], **params: Any) -> Completion:
        """Call through, price the answer and count it."""
        asked = str(params.get("model") or self.name)
        try:
            result = await self.inner.complete(messages, **params)
        except ProviderError as err:
            self.meter.record_error(asked, err.kind)
            raise
        if result.cached:
            self.meter.record(result.model, result.usage, cached=True)
            return result
        price = price_of(self.prices, result.model) or price_of(self.prices, asked)
        if price is not None:
            usd = (result.usage.input_tokens * price[0] + result.usage.output_tokens * price[1]) / 1e6
            result = replace(result, usage=replace(result.usage, cost=usd))
        self.meter.record(result.model, result.usage, priced=price is not None or result.usage.cost > 0)
        return result
