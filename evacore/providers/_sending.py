"""Sending a provider request and opening its response (R2.11): through `StreamClient`
(one parser callback per network read), or through httpx when the environment sends the
URL through a proxy. Connect errors, bad URLs and error statuses become ProviderErrors
with the connection's secrets redacted.

Must not: retry, read the body's events or know a vendor's format (`_transport.py` and the
adapters do).
"""

from __future__ import annotations

import importlib.util
import sys
import urllib.request
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager

import httpx
import orjson

from evacore.errors import ProviderConnectionError
from evacore.providers._pools import SpreadTransport
from evacore.providers._stream_client import StreamClient, StreamError, StreamResponse
from evacore.providers._transport import (
    Deadlines,
    http_error,
    label,
    timeout_error,
    upstream_message,
    within,
)
from evacore.providers.base import Connection, Timeouts, WireRequest
from evacore.redact import redact


def _remember_missing_sniffio() -> None:
    """httpcore runs `import sniffio` on every request and falls back to asyncio when it is
    missing; a failed import is not cached, so each one searches sys.path again (about 2 ms
    a request). Record the absence once so the import fails at once."""
    if "sniffio" not in sys.modules and importlib.util.find_spec("sniffio") is None:
        sys.modules["sniffio"] = None  # type: ignore[assignment]


_remember_missing_sniffio()


def make_http_client() -> httpx.AsyncClient:
    """One shared HTTP/1.1 keep-alive client; per-request timeouts are set by the adapters."""
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=50, keepalive_expiry=30)
    return httpx.AsyncClient(timeout=None, transport=SpreadTransport(limits=limits),
                             follow_redirects=False)


def _request_timeout(t: Timeouts) -> httpx.Timeout:
    # reads are bounded by Deadlines (first token / idle / total), not by httpx
    return httpx.Timeout(connect=t.connect, read=None, write=max(t.connect, t.idle), pool=t.connect)


async def _send_httpx(client: httpx.AsyncClient, wire: WireRequest, url: str,
                      headers: Mapping[str, str], body: bytes, dl: Deadlines,
                      conn: Connection) -> HttpxBody:
    try:
        request = client.build_request(wire.method, url, headers=headers, content=body,
                                       timeout=_request_timeout(conn.timeouts))
    except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
        raise ProviderConnectionError(f"{label(conn)}: bad base URL: {exc}") from None
    try:
        return HttpxBody(await within(client.send(request, stream=True), dl, conn))
    except (httpx.ConnectTimeout, httpx.PoolTimeout):
        raise timeout_error(conn, "connect") from None
    except httpx.UnsupportedProtocol as exc:
        raise ProviderConnectionError(f"{label(conn)}: bad base URL: {exc}") from None
    except httpx.TransportError as exc:
        raise ProviderConnectionError(
            f"{label(conn)}: connection failed: {redact(str(exc) or type(exc).__name__)}",
            retryable=True,
        ) from None


async def _send_streams(streams: StreamClient, wire: WireRequest, url: str,
                        headers: Mapping[str, str], body: bytes, dl: Deadlines,
                        conn: Connection, early: Callable[[bytes], bool] | None = None
                        ) -> StreamResponse:
    try:
        return await within(
            streams.send(wire.method, url, headers, body, conn.timeouts.connect, early),
            dl, conn)
    except ValueError as exc:
        raise ProviderConnectionError(f"{label(conn)}: {redact(str(exc))}") from None
    except TimeoutError:
        raise timeout_error(conn, "connect") from None
    except StreamError as exc:
        raise ProviderConnectionError(
            f"{label(conn)}: connection failed: {redact(str(exc))}", retryable=True) from None


async def read_body(response: StreamResponse | HttpxBody, dl: Deadlines,
                    conn: Connection) -> bytes:
    return await within(response.aread(), dl, conn)


_PROXIED: dict[str, bool] = {}


def proxied(url: str) -> bool:
    """Whether the environment (`HTTPS_PROXY`, `NO_PROXY`…) sends `url` through a proxy:
    such requests go through httpx, which speaks to proxies; the rest through
    `StreamClient`."""
    origin = url.split("/", 3)[:3]
    key = "/".join(origin)
    known = _PROXIED.get(key)
    if known is None:
        proxies = urllib.request.getproxies_environment()
        scheme, host = origin[0].rstrip(":").lower(), origin[-1].rsplit("@", 1)[-1]
        known = bool(proxies.get(scheme) or proxies.get("all")) and not (
            urllib.request.proxy_bypass_environment(host, proxies))
        _PROXIED[key] = known
    return known


class HttpxBody:
    """An httpx streaming response read like a `StreamResponse` (the proxied path)."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.status_code = response.status_code
        self.headers = response.headers
        encoded = response.headers.get("content-encoding", "identity").lower() not in (
            "", "identity")
        self._chunks = (response.aiter_bytes() if encoded else response.aiter_raw()).__aiter__()

    async def read(self) -> bytes:
        try:
            return await anext(self._chunks)
        except StopAsyncIteration:
            return b""

    async def aread(self) -> bytes:
        return await self.response.aread()

    async def aclose(self) -> None:
        await self.response.aclose()


@asynccontextmanager
async def open_stream(
    streams: StreamClient,
    wire: WireRequest,
    headers: Mapping[str, str],
    dl: Deadlines,
    conn: Connection,
    url: str | None = None,
    early: Callable[[bytes], bool] | None = None,
) -> AsyncIterator[StreamResponse | HttpxBody]:
    """Send `wire` with real headers (and the real `url`: `wire.url` has its secrets
    masked) and yield its response (status < 400) to `read()` chunk by chunk or `aread()`
    whole: through `streams` (one parser callback per network read), or, when the
    environment names a proxy for the URL, through its httpx client that speaks to it.
    `early`: the body tap offered what comes with the head (`StreamClient.send`; not on
    the proxied path).

    Leaving the block for any reason (end, error, cancellation) closes the response, which
    closes the socket when the body was not read to the end.
    """
    target = url or wire.url
    response: StreamResponse | HttpxBody
    # the body's bytes are not kept in this frame: it stays open while the answer streams
    if proxied(target):
        response = await _send_httpx(streams.via_proxy(), wire, target, headers,
                                     orjson.dumps(wire.body), dl, conn)
    else:
        response = await _send_streams(streams, wire, target, headers,
                                       orjson.dumps(wire.body), dl, conn, early)
    try:
        if response.status_code >= 400:
            raw = await within(response.aread(), dl, conn)
            raise http_error(conn, response.status_code, upstream_message(raw), response.headers)
        yield response
    except (StreamError, httpx.TransportError) as exc:
        what = redact(str(exc) or type(exc).__name__)
        raise ProviderConnectionError(
            f"{label(conn)}: the connection broke during the answer: {what}",
            retryable=not dl.first_token_seen,
        ) from None
    finally:
        await response.aclose()
