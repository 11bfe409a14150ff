"""`FatalLatch`: an endpoint that answers 401 sees one request however many calls wait; after an answer calls run
at once; a transient failure does not latch."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import anyio
import pytest

from agentgrad.errors import SystemicError
from agentgrad.providers import AuthError, CallableProvider, FatalLatch, Message, OpenAICompatible, ServerError
from agentgrad.providers.errors import SilentEndpointError
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


class _SilentServer:
    """A TCP server on 127.0.0.1 that accepts connections, reads, and never answers."""

    def __init__(self) -> None:
        self.connections = 0
        self.url = ""

    async def __aenter__(self) -> _SilentServer:
        async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            await reader.read(65536)
            await asyncio.sleep(3600)

        self._server = await asyncio.start_server(hold, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/v1"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.close()


def test_a_silent_endpoint_stops_every_call_within_the_first_answer_bound_after_one_request() -> None:
    async def main() -> tuple[list[str], float, int]:
        async with _SilentServer() as silent:
            latch = FatalLatch(OpenAICompatible(silent.url, model="m", timeout=60.0), first_answer_within=0.5)
            outcomes: list[str] = []
            started = anyio.current_time()

            async def one() -> None:
                try:
                    await latch.complete(USER)
                except SilentEndpointError as err:
                    outcomes.append(err.kind)

            async with anyio.create_task_group() as group:
                for _ in range(16):
                    group.start_soon(one)
            return outcomes, anyio.current_time() - started, silent.connections

    outcomes, seconds, connections = asyncio.run(main())
    assert outcomes == ["silent"] * 16 and connections == 1
    assert seconds < 5  # about the bound, not 16 x 60 s, nor 60 s x the retries


def test_the_named_model_stack_bounds_the_first_answer_at_30_seconds() -> None:
    from agentgrad.agents.skill import resolve_model
    from agentgrad.providers.middleware.base import layers

    latch = next(p for p in layers(resolve_model("openai:m")) if isinstance(p, FatalLatch))
    assert latch.first_answer_within == 30.0
    assert issubclass(SilentEndpointError, SystemicError)  # raised inside run, it stops the run at once
