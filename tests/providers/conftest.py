"""Fixtures: one fake LLM server per test session (127.0.0.1, free port), reset before each test that uses it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.providers.fake_server import FakeServer


@pytest.fixture(scope="session")
def fake_server() -> Iterator[FakeServer]:
    server = FakeServer().start()
    yield server
    server.stop()


@pytest.fixture
def server(fake_server: FakeServer) -> FakeServer:
    fake_server.reset()
    return fake_server
