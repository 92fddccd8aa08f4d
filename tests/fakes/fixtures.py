"""pytest fixtures for the loopback fake upstreams and a loopback-only HTTP client.

Import the ones you need in a conftest: `from tests.fakes.fixtures import openai_fake`.
Must not: allow a request to leave 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from tests.fakes.upstream import FakeUpstream

LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})


def _fake(kind: str) -> Iterator[FakeUpstream]:
    upstream = FakeUpstream(kind).start()
    try:
        yield upstream
    finally:
        upstream.stop()


@pytest.fixture
def openai_fake() -> Iterator[FakeUpstream]:
    """Fake OpenAI-compatible server; `.connection()` builds an openai-chat Connection."""
    yield from _fake("openai-chat")


@pytest.fixture
def openai_text_fake() -> Iterator[FakeUpstream]:
    """Same server; `.connection()` builds an openai-text Connection."""
    yield from _fake("openai-text")


@pytest.fixture
def anthropic_fake() -> Iterator[FakeUpstream]:
    yield from _fake("anthropic")


@pytest.fixture
def kobold_fake() -> Iterator[FakeUpstream]:
    yield from _fake("kobold")


@pytest.fixture
def llamacpp_fake() -> Iterator[FakeUpstream]:
    """An OpenAI-compatible server with llama.cpp's /tokenize (openai-chat Connection)."""
    yield from _fake("openai-chat")


async def _refuse_non_loopback(request: httpx.Request) -> None:
    if request.url.host not in LOOPBACK:
        raise RuntimeError(f"tests talk to loopback only, not {request.url.host!r}")


def loopback_client() -> httpx.AsyncClient:
    """An httpx client that refuses any host but loopback (for adapters under test)."""
    return httpx.AsyncClient(timeout=None, verify=False,  # plain http; skips loading CA certs
                             event_hooks={"request": [_refuse_non_loopback]})


@pytest.fixture
async def http_client() -> AsyncIterator[httpx.AsyncClient]:
    async with loopback_client() as client:
        yield client
