"""The loopback fakes themselves: loopback only, connection bookkeeping."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.fakes.fixtures import loopback_client
from tests.fakes.server import LoopbackServer
from tests.fakes.upstream import FakeUpstream


async def _nothing(exchange: object) -> None:
    return None


def test_fakes_refuse_non_loopback_binds() -> None:
    with pytest.raises(ValueError, match="loopback"):
        LoopbackServer(_nothing, host="0.0.0.0")


async def test_loopback_client_refuses_other_hosts() -> None:
    async with loopback_client() as client:
        with pytest.raises(RuntimeError, match="loopback"):
            await client.get("http://example.com/")


async def test_fakes_count_open_connections(openai_fake: FakeUpstream) -> None:
    async with httpx.AsyncClient(verify=False) as client:
        response = await client.post(openai_fake.base_url + "/chat/completions",
                                     json={"messages": []})
        assert response.json()["choices"][0]["message"]["content"]
        assert openai_fake.open_connections == 1  # kept alive
    for _ in range(100):
        if openai_fake.open_connections == 0:
            break
        await asyncio.sleep(0.005)
    assert openai_fake.open_connections == 0
    assert not openai_fake.client_left.is_set()  # left after the answer, not during it
