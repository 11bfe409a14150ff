"""Tests of the SQLite `Cache`: hits and misses, the temperature rule, the key, persistence."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agentgrad.errors import ConfigError
from agentgrad.providers import Cache, CallableProvider, Completion, Message, ServerError, Usage
from tests.providers.helpers import USER


class Counting:
    """A provider body that counts its calls and reports usage and a cost."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, messages: Sequence[Message], **params: Any) -> Completion:
        self.calls += 1
        return Completion(f"answer {self.calls}", Usage(10, 5, 0.25), 0.1, str(params.get("model", "m")), "stop")


def make(tmp_path: Path, force: bool = False, name: str = "p") -> tuple[Counting, Cache]:
    body = Counting()
    return body, Cache(CallableProvider(body, name=name), tmp_path / "cache.sqlite", force=force)


def ask(cache: Cache, messages: tuple[Message, ...] = USER, **params: Any) -> Completion:
    return asyncio.run(cache.complete(messages, **params))


def test_a_repeated_deterministic_request_is_a_free_hit(tmp_path: Path) -> None:
    body, cache = make(tmp_path)
    first = ask(cache, temperature=0, model="m")
    second = ask(cache, temperature=0, model="m")
    assert (first.cached, second.cached) == (False, True)
    assert second.text == first.text == "answer 1"
    assert second.usage == Usage(10, 5, 0.0)
    assert (second.model, second.finish_reason) == ("m", "stop")
    assert body.calls == 1 and cache.stats() == {"hits": 1, "misses": 1, "bypassed": 0}


@pytest.mark.parametrize("params", [{"temperature": 0.7}, {}, {"temperature": None}])
def test_sampled_or_unspecified_temperature_is_not_cached(tmp_path: Path, params: dict[str, Any]) -> None:
    body, cache = make(tmp_path)
    ask(cache, **params), ask(cache, **params)
    assert body.calls == 2 and cache.stats()["bypassed"] == 2


def test_force_caches_sampled_requests(tmp_path: Path) -> None:
    body, cache = make(tmp_path, force=True)
    assert ask(cache, temperature=1.0).text == ask(cache, temperature=1.0).text
    assert body.calls == 1


@pytest.mark.parametrize("change", [{"model": "other"}, {"max_tokens": 9}, {"stop": ["x"]}])
def test_any_change_of_params_is_a_miss(tmp_path: Path, change: dict[str, Any]) -> None:
    body, cache = make(tmp_path)
    ask(cache, temperature=0, model="m")
    ask(cache, temperature=0, **{"model": "m", **change})
    assert body.calls == 2


def test_a_change_of_messages_or_provider_is_a_miss(tmp_path: Path) -> None:
    body, cache = make(tmp_path)
    ask(cache, temperature=0)
    ask(cache, (Message("system", "s"), *USER), temperature=0)
    assert body.calls == 2
    other_body = Counting()
    other = Cache(CallableProvider(other_body, name="q"), tmp_path / "cache.sqlite")
    ask(other, temperature=0)
    assert other_body.calls == 1


def test_timeout_does_not_change_the_key(tmp_path: Path) -> None:
    body, cache = make(tmp_path)
    ask(cache, temperature=0, timeout=5)
    assert ask(cache, temperature=0, timeout=60).cached
    assert body.calls == 1


def test_the_cache_persists_in_its_file(tmp_path: Path) -> None:
    _, cache = make(tmp_path)
    ask(cache, temperature=0)
    cache.close()
    body, reopened = make(tmp_path)
    assert ask(reopened, temperature=0).cached and body.calls == 0


def test_errors_are_not_cached(tmp_path: Path) -> None:
    calls: list[int] = []

    def down_once(messages: Sequence[Message], **params: Any) -> str:
        calls.append(1)
        if len(calls) == 1:
            raise ServerError("down")
        return "up"

    cache = Cache(CallableProvider(down_once), tmp_path / "c.sqlite")
    with pytest.raises(ServerError):
        ask(cache, temperature=0)
    assert ask(cache, temperature=0).text == "up"


def test_a_param_that_is_not_json_is_a_clear_error(tmp_path: Path) -> None:
    _, cache = make(tmp_path)
    with pytest.raises(ConfigError, match="JSON"):
        ask(cache, temperature=0, response_format=object())
