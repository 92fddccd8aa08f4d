"""The streamed-answer HTTP client (R2.11): keep-alive that survives a server closing idle
connections, TLS with certificate checks, gzip bodies, a bounded read buffer for a slow
consumer, clear errors for what is not HTTP, and the proxy environment routed through
httpx."""

from __future__ import annotations

import asyncio
import gc
import gzip
import ssl
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
import trustme

from evacore.errors import ProviderConnectionError
from evacore.providers import Connection, make_provider
from evacore.providers import _sending as transport
from evacore.providers._stream_client import PAUSE_AT_BYTES, StreamClient
from tests.providers.helpers import chat_request, events_of, text_of

SSE = (b'data: {"choices":[{"index":0,"delta":{"content":"Hi there."}}]}\n\n'
       b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
       b"data: [DONE]\n\n")


def _chunked(body: bytes) -> bytes:
    return b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)


OK_STREAM = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
             b"Transfer-Encoding: chunked\r\n\r\n" + _chunked(SSE))


class _Raw(asyncio.Protocol):
    """Answers every request head with what `answer` returns; may close afterwards."""

    def __init__(self, answer: Callable[[], bytes], close_after: bool, seen: list[int]) -> None:
        self.answer, self.close_after, self.seen = answer, close_after, seen
        self.buf = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.seen.append(1)

    def data_received(self, data: bytes) -> None:
        self.buf += data
        head, sep, rest = self.buf.partition(b"\r\n\r\n")
        if not sep:
            return
        length = int(next((line.split(b":")[1] for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length")), b"0"))
        if len(rest) < length:
            return
        self.buf = rest[length:]
        self.transport.write(self.answer())  # type: ignore[attr-defined]
        if self.close_after:
            self.transport.close()


@asynccontextmanager
async def raw_server(answer: Callable[[], bytes], *, close_after: bool = False,
                     tls: ssl.SSLContext | None = None
                     ) -> AsyncIterator[tuple[str, list[int]]]:
    seen: list[int] = []
    server = await asyncio.get_running_loop().create_server(
        lambda: _Raw(answer, close_after, seen), "127.0.0.1", 0, ssl=tls)
    port = server.sockets[0].getsockname()[1]
    scheme, host = ("https", "localhost") if tls else ("http", "127.0.0.1")
    try:
        yield f"{scheme}://{host}:{port}/v1", seen
    finally:
        server.close()


@asynccontextmanager
async def _provider(conn: Connection, **kwargs: Any) -> AsyncIterator[Any]:
    provider = make_provider(conn, **kwargs)
    try:
        yield provider
    finally:
        await provider.aclose()


def _connection(base_url: str) -> Connection:
    return Connection(id="c1", name="raw", kind="openai-chat", base_url=base_url,
                      model="m", retries=0)


async def test_r2_11_an_idle_connection_the_server_closed_is_not_reused() -> None:
    async with (raw_server(lambda: OK_STREAM, close_after=True) as (url, seen),
                _provider(_connection(url)) as provider):
        for _ in range(3):
            assert text_of(await events_of(provider, chat_request())) == "Hi there."
            await asyncio.sleep(0.05)
    assert len(seen) == 3  # a fresh connection each time, and no request failed


async def test_r2_11_a_kept_alive_connection_carries_the_next_answer() -> None:
    async with (raw_server(lambda: OK_STREAM) as (url, seen),
                _provider(_connection(url)) as provider):
        for _ in range(3):
            assert text_of(await events_of(provider, chat_request())) == "Hi there."
    assert len(seen) == 1


async def test_r2_11_a_gzip_encoded_stream_is_decoded() -> None:
    body = gzip.compress(SSE)
    answer = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Encoding: gzip"
              b"\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    async with (raw_server(lambda: answer) as (url, _),
                _provider(_connection(url)) as provider):
        assert text_of(await events_of(provider, chat_request())) == "Hi there."


async def test_r2_11_what_is_not_http_is_a_clear_connection_error() -> None:
    async with (raw_server(lambda: b"SSH-2.0-OpenSSH_9.6\r\n\r\n") as (url, _),
                _provider(_connection(url)) as provider):
        with pytest.raises(ProviderConnectionError) as caught:
            await events_of(provider, chat_request())
    assert "malformed HTTP" in str(caught.value)


async def test_r12_4_a_body_nobody_reads_stops_being_read_from_the_socket() -> None:
    piece = b"data: " + b"x" * 4000 + b"\n\n"
    flood = b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for _ in range(2000))  # 8 MB
    answer = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
              b"Transfer-Encoding: chunked\r\n\r\n" + flood + b"0\r\n\r\n")
    async with raw_server(lambda: answer) as (url, _):
        client = StreamClient()
        response = await client.send("POST", url + "/chat/completions", {}, b"{}", 5)
        try:
            await asyncio.sleep(0.3)  # the consumer is busy elsewhere
            held = response._conn.buffered
            assert response._conn.paused
            assert held < PAUSE_AT_BYTES + 256 * 1024, held
            total = len(await response.read())
            while data := await response.read():
                total += len(data)
            assert total == 2000 * len(piece)  # nothing lost once reading resumed
        finally:
            await response.aclose()
            await client.aclose()


async def test_r2_11_a_proxy_from_the_environment_is_honoured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(transport, "_PROXIED", {})
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "internal.example")
    assert transport.proxied("https://api.example.com/v1/chat/completions")
    assert not transport.proxied("https://internal.example/v1/chat/completions")
    assert not transport.proxied("http://127.0.0.1:8080/v1/chat/completions")


async def test_r2_11_a_proxied_answer_goes_through_the_proxy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with raw_server(lambda: OK_STREAM) as (proxy_url, seen):
        monkeypatch.setattr(transport, "_PROXIED", {})
        monkeypatch.setenv("HTTP_PROXY", proxy_url.removesuffix("/v1"))
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        async with _provider(_connection("http://upstream.invalid/v1")) as provider:
            assert text_of(await events_of(provider, chat_request())) == "Hi there."
    assert len(seen) == 1  # the request reached the proxy, not the unresolvable host


async def test_r2_11_a_bad_url_is_named() -> None:
    async with _provider(_connection("ftp://example.com/v1")) as provider:
        with pytest.raises(ProviderConnectionError) as caught:
            await events_of(provider, chat_request())
    assert "bad base URL" in str(caught.value)


async def test_r2_11_whole_answers_share_the_kept_alive_connection() -> None:
    body = b'{"choices":[{"index":0,"message":{"content":"Whole."},"finish_reason":"stop"}]}'
    answer = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d"
              b"\r\n\r\n%s" % (len(body), body))
    async with (raw_server(lambda: answer) as (url, seen),
                _provider(_connection(url), client=httpx.AsyncClient()) as provider):
        for _ in range(2):
            assert (await provider.complete(chat_request())).text == "Whole."
    assert len(seen) == 1


async def test_r2_11_a_header_with_a_line_break_is_refused_before_sending() -> None:
    async with raw_server(lambda: b"") as (url, seen):
        conn = Connection(id="c1", name="raw", kind="openai-chat", base_url=url, model="m",
                          retries=0, params={"extra_headers": {"X-Team": "a\r\nX-Evil: 1"}})
        async with _provider(conn) as provider:
            with pytest.raises(ProviderConnectionError) as caught:
                await events_of(provider, chat_request())
    assert "line break" in str(caught.value)
    assert not seen  # nothing was sent


async def test_r2_11_https_upstreams_are_verified_and_kept_alive() -> None:
    ca = trustme.CA()
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(server_tls)
    trusting = ssl.create_default_context()
    ca.configure_trust(trusting)
    async with raw_server(lambda: OK_STREAM, tls=server_tls) as (url, seen):
        assert url.startswith("https://localhost:")
        streams = StreamClient(ssl_context=trusting)
        try:
            async with _provider(_connection(url), streams=streams) as provider:
                for _ in range(2):
                    assert text_of(await events_of(provider, chat_request())) == "Hi there."
        finally:
            await streams.aclose()
        assert len(seen) == 1  # one TLS handshake for both answers
        # a client that does not trust the server's certificate refuses it
        async with _provider(_connection(url)) as untrusting:
            with pytest.raises(ProviderConnectionError) as caught:
                await events_of(untrusting, chat_request())
    assert "certificate" in str(caught.value).lower()


async def test_r2_11_the_close_ends_a_body_without_length_even_with_no_done_event() -> None:
    """No `[DONE]` and neither a length nor chunks: the connection's end is the body's end,
    read at once (not an error, and no wait for the idle timeout)."""
    body = SSE.removesuffix(b"data: [DONE]\n\n")
    answer = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
              + body)
    async with (raw_server(lambda: answer, close_after=True) as (url, _),
                _provider(_connection(url)) as provider):
        events = await asyncio.wait_for(events_of(provider, chat_request()), 5)
    assert text_of(events) == "Hi there."


async def test_r2_11_a_body_that_ends_with_the_connection_is_read_whole() -> None:
    answer = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
              + SSE)
    async with (raw_server(lambda: answer, close_after=True) as (url, seen),
                _provider(_connection(url)) as provider):
        for _ in range(2):
            assert text_of(await events_of(provider, chat_request())) == "Hi there."
    assert len(seen) == 2  # never reused: the server said it closes


async def test_r2_11_a_connection_closed_mid_answer_is_freed_without_the_cycle_collector(
) -> None:
    """An answer aborted mid-stream closes its connection; what the connection held (its
    parser, buffers, futures) goes with the last reference, not at the next full pass of
    the garbage collector, which under load runs seconds apart."""
    half = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n" + b"%x\r\n%s\r\n" % (len(SSE[:60]), SSE[:60]))
    async with raw_server(lambda: half) as (url, _):
        client = StreamClient()
        gc.disable()
        try:
            response = await client.send("POST", url + "/chat/completions", {}, b"{}", 5)
            assert await response.read()
            conn = weakref.ref(response._conn)
            await response.aclose()  # the reader gives up with the body unfinished
            await asyncio.sleep(0.05)  # the transport's close reaches the protocol
            del response
            assert conn() is None, gc.get_referrers(conn())
        finally:
            gc.enable()
            await client.aclose()
