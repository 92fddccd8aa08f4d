"""The transport that spreads provider requests over several connection pools
(providers/_pools.py), against real loopback servers: a quiet client keeps one warm
connection, concurrent streams spread out, and every way a request ends gives its slot back."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from evacore.providers._pools import SpreadTransport
from evacore.providers._sending import make_http_client


class Server:
    """Answers each request with a chunked body; `hold` keeps answers open until released."""

    def __init__(self) -> None:
        self.connections = 0
        self.release = asyncio.Event()
        self.release.set()
        self.server: asyncio.base_events.Server | None = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                await reader.readexactly(length)
                writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                             b"5\r\nfirst\r\n")
                await writer.drain()
                await self.release.wait()
                writer.write(b"4\r\nlast\r\n0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def __aenter__(self) -> Server:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/"


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with make_http_client() as c:
        yield c


def spread(client: httpx.AsyncClient) -> SpreadTransport:
    transport = client._transport  # type: ignore[attr-defined]
    assert isinstance(transport, SpreadTransport)
    return transport


async def test_a_quiet_client_keeps_one_warm_connection(client: httpx.AsyncClient) -> None:
    async with Server() as server:
        for _ in range(10):
            r = await client.post(server.url, content=b"hi")
            assert r.text == "firstlast"
        assert server.connections == 1
    assert spread(client).in_flight == [0] * len(spread(client).in_flight)


async def test_concurrent_streams_spread_over_the_pools(client: httpx.AsyncClient) -> None:
    pools = len(spread(client).in_flight)
    async with Server() as server:
        server.release.clear()
        opened: list[httpx.Response] = []

        async def open_stream() -> None:
            request = client.build_request("POST", server.url, content=b"x")
            response = await client.send(request, stream=True)
            opened.append(response)

        await asyncio.gather(*(open_stream() for _ in range(pools * 2)))
        assert spread(client).in_flight == [2] * pools  # every pool carries two
        server.release.set()
        bodies = [b"".join([c async for c in r.aiter_raw()]) for r in opened]
        for r in opened:
            await r.aclose()
    assert bodies == [b"firstlast"] * (pools * 2)
    assert spread(client).in_flight == [0] * pools


async def test_every_ending_gives_the_slot_back(client: httpx.AsyncClient) -> None:
    async with Server() as server:
        server.release.clear()
        async with client.stream("POST", server.url, content=b"x") as r:
            async for chunk in r.aiter_raw():
                assert chunk == b"first"
                break  # a client that leaves in the middle of the answer
        assert spread(client).in_flight[0] == 0
        url = server.url
    with pytest.raises(httpx.ConnectError):
        await client.get(url)  # nobody listens any more
    assert sum(spread(client).in_flight) == 0


def test_limits_are_shared_out_between_the_pools() -> None:
    transport = SpreadTransport(4, limits=httpx.Limits(max_connections=10,
                                                       max_keepalive_connections=6))
    pools = [t._pool for t in transport._transports]  # type: ignore[attr-defined]
    assert [p._max_connections for p in pools] == [3, 3, 3, 3]
    assert [p._max_keepalive_connections for p in pools] == [2, 2, 2, 2]
