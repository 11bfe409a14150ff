"""`FatalLatch`: an endpoint that answers 401 sees one request however many calls wait; after an answer calls run
at once; a transient failure does not latch."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import anyio
import pytest

from agentgrad.providers import AuthError, CallableProvider, FatalLatch, Message, OpenAICompatible, ServerError
from tests.providers.fake_server import FakeServer
from tests.providers.helpers import USER


async def _many(latch: FatalLatch, n: int) -> list[str]:
    outcomes: list[str] = []

    async def one() -> None:
        try:
            outcomes.append((await latch.complete(USER)).text)
        except (AuthError, ServerError) as err:
            outcomes.append(err.kind)

    async with anyio.create_task_group() as group:
        for _ in range(n):
            group.start_soon(one)
    return outcomes


def test_an_endpoint_that_answers_401_sees_one_request_however_many_calls_wait(server: FakeServer) -> None:
    latch = FatalLatch(OpenAICompatible(server.url + "/v1", model="err-401"))
    assert asyncio.run(_many(latch, 16)) == ["auth"] * 16
    assert server.counts["err-401"] == 1
    with pytest.raises(AuthError, match="no request sent"):
        asyncio.run(latch.complete(USER))
    assert server.counts["err-401"] == 1


def test_after_one_answer_calls_go_through_together(server: FakeServer) -> None:
    latch = FatalLatch(OpenAICompatible(server.url + "/v1", model="slow-50ms"))
    assert asyncio.run(latch.complete(USER)).text
    server.reset()
    asyncio.run(_many(latch, 8))
    assert server.max_in_flight > 1


def test_a_transient_failure_does_not_latch_and_the_next_call_probes() -> None:
    answers = iter(["down", "ok"])

    def body(messages: Sequence[Message], **params: Any) -> str:
        if next(answers) == "down":
            raise ServerError("down", status=503)
        return "fine"

    latch = FatalLatch(CallableProvider(body))
    with pytest.raises(ServerError):
        asyncio.run(latch.complete(USER))
    assert latch.latched is None and not latch.answered
    assert asyncio.run(latch.complete(USER)).text == "fine"
    assert latch.answered
