"""Tests of `Meter` and `Accounting`: totals, prices (default and extended), errors, cache hits, state dicts."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agentgrad.errors import ConfigError, StateDictError
from agentgrad.providers import (
    DEFAULT_PRICES,
    Accounting,
    AuthError,
    Cache,
    CallableProvider,
    Completion,
    Message,
    Meter,
    OpenAICompatible,
    Retry,
    Tally,
    Usage,
    wrap,
)
from agentgrad.providers.middleware.accounting import price_of
from tests.providers.fake_server import FakeServer
from tests.providers.helpers import USER, RecordingSleep


def reply(tokens_in: int, tokens_out: int, model: str | None = None) -> CallableProvider:
    def fn(messages: Sequence[Message], **params: Any) -> Completion:
        return Completion("x", Usage(tokens_in, tokens_out), 0.01, model or str(params["model"]), "stop")

    return CallableProvider(fn)


def ask(provider: Accounting | Cache, **params: Any) -> Completion:
    return asyncio.run(provider.complete(USER, **params))


def test_cost_follows_the_price_table_and_totals_add_up() -> None:
    meter = Meter()
    acct = Accounting(reply(1_000_000, 200_000), meter)
    first = ask(acct, model="gpt-4o")
    ask(acct, model="gpt-4o-mini")
    assert first.usage.cost == pytest.approx(2.50 + 0.2 * 10.00)
    assert meter.by_model()["gpt-4o-mini"].cost == pytest.approx(0.15 + 0.2 * 0.60)
    totals = meter.totals
    assert (totals.calls, totals.input_tokens, totals.output_tokens) == (2, 2_000_000, 400_000)
    assert totals.cost == pytest.approx(4.50 + 0.27) and meter.cost == totals.cost


def test_a_user_table_extends_the_defaults_without_touching_them() -> None:
    meter = Meter()
    mine = {**DEFAULT_PRICES, "local-llama": (0.0, 0.0), "my-model": (1.0, 3.0)}
    acct = Accounting(reply(500_000, 100_000), meter, mine)
    assert ask(acct, model="my-model").usage.cost == pytest.approx(0.5 + 0.3)
    ask(acct, model="local-llama")
    assert meter.totals.unpriced_calls == 0
    assert "my-model" not in DEFAULT_PRICES
    with pytest.raises(TypeError):
        DEFAULT_PRICES["x"] = (1.0, 1.0)  # type: ignore[index]


def test_dated_variants_share_a_price_but_other_names_do_not() -> None:
    assert price_of(DEFAULT_PRICES, "gpt-4o-2024-08-06") == DEFAULT_PRICES["gpt-4o"]
    assert price_of(DEFAULT_PRICES, "claude-haiku-4-5-20251001") == DEFAULT_PRICES["claude-haiku-4-5"]
    assert price_of(DEFAULT_PRICES, "gpt-4o-turbo-x") is None


def test_an_unpriced_model_counts_tokens_and_is_flagged() -> None:
    meter = Meter()
    result = ask(Accounting(reply(100, 50), meter), model="mystery")
    assert result.usage.cost == 0.0
    assert meter.totals == Tally(calls=1, input_tokens=100, output_tokens=50, unpriced_calls=1)


def test_failures_are_counted_by_kind(server: FakeServer) -> None:
    meter = Meter()
    stack = wrap(OpenAICompatible(server.url + "/v1", model="fail-1-then-ok"),
                 lambda p: Accounting(p, meter), lambda p: Retry(p, sleep=RecordingSleep()))
    asyncio.run(stack.complete(USER))
    with pytest.raises(AuthError):
        asyncio.run(stack.complete(USER, model="err-401"))
    assert meter.errors() == {"server": 1, "auth": 1}
    assert meter.by_model()["fail-1-then-ok"].calls == 1
    assert meter.totals.errors == 2


def test_cache_hits_are_counted_apart_and_cost_nothing(tmp_path: Path) -> None:
    meter = Meter()
    stack = Accounting(Cache(reply(1_000_000, 0), tmp_path / "c.sqlite"), meter)
    ask(stack, model="gpt-4o", temperature=0)
    hit = ask(stack, model="gpt-4o", temperature=0)
    assert hit.cached and hit.usage.cost == 0.0
    tally = meter.by_model()["gpt-4o"]
    assert (tally.calls, tally.cached_calls, tally.input_tokens) == (1, 1, 1_000_000)
    assert tally.cost == pytest.approx(2.50)


def test_meter_state_round_trips_through_json() -> None:
    meter = Meter()
    acct = Accounting(reply(123, 45), meter)
    ask(acct, model="gpt-4o")
    meter.record_error("gpt-4o", "timeout")
    restored = Meter()
    restored.load_state_dict(json.loads(json.dumps(meter.state_dict())))
    assert restored.state_dict() == meter.state_dict()
    assert restored.totals == meter.totals


@pytest.mark.parametrize("bad", [
    {"version": 2, "models": {}, "errors": {}},
    {"version": 1, "models": {"m": {"calls": -1}}, "errors": {}},
    {"version": 1, "models": {}, "errors": {"auth": "x"}},
    {"version": 1, "models": {}},
])
def test_a_bad_state_dict_is_refused_and_changes_nothing(bad: dict[str, Any]) -> None:
    meter = Meter()
    meter.record("m", Usage(1, 1, 0.5))
    before = meter.state_dict()
    with pytest.raises(StateDictError):
        meter.load_state_dict(bad)
    assert meter.state_dict() == before


@pytest.mark.parametrize("prices", [{"m": (1.0,)}, {"m": (-1.0, 1.0)}, {"m": (float("inf"), 1.0)}])
def test_a_bad_price_table_is_refused(prices: Any) -> None:
    with pytest.raises(ConfigError, match="'m'"):
        Accounting(reply(1, 1), Meter(), prices)
