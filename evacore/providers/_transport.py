"""Request discipline for the HTTP adapters (R2.11): deadlines (connect, first token, idle,
total), retries with backoff only before the first token, error mapping with the
connection's secrets redacted (`evacore.redact`), and closing the upstream response at once
when the consumer goes away.

Must not: know any vendor's request body or event format.
"""

from __future__ import annotations

import asyncio
import codecs
import email.utils
import importlib.util
import math
import random
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import aclosing, asynccontextmanager
from datetime import UTC, datetime
from typing import Any, TypeVar

import httpx
import orjson
import structlog

from evacore.errors import (
    ProviderConnectionError,
    ProviderError,
    ProviderHTTPError,
    ProviderTimeout,
)
from evacore.providers._pools import SpreadTransport
from evacore.providers._sse import SSEDecoder, SSEEvent
from evacore.providers._stream_client import StreamClient, StreamError, StreamResponse
from evacore.providers.base import Connection, Timeouts, WireRequest
from evacore.redact import redact

T = TypeVar("T")
log = structlog.get_logger(__name__)

_BACKOFF_CEILING = 8.0


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


def label(conn: Connection) -> str:
    return f"{conn.kind} connection {conn.name!r}"


class Deadlines:
    """The clock of one provider request: total over all attempts, first token per attempt,
    idle per read once a token arrived. Non-stream requests only know connect and total.

    Reads are guarded by one lazy timer per request (a read only moves a number; the
    timer re-arms itself when it fires early), which keeps the per-chunk cost tiny.
    """

    def __init__(self, timeouts: Timeouts, *, streaming: bool = True) -> None:
        self.timeouts = timeouts
        self.streaming = streaming
        now = time.monotonic()
        self._total_at = now + timeouts.total
        self._first_at = now + timeouts.first_token
        self.first_token_seen = False
        self.expired: str | None = None
        self._guard_until = math.inf
        self._guard_which = ""
        self._task: asyncio.Task[Any] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf

    def arm(self, until: float, which: str, task: asyncio.Task[Any] | None = None) -> None:
        self._guard_until, self._guard_which = until, which
        self._task = task or asyncio.current_task()
        if self._timer is None or self._timer_at > until:
            if self._timer is not None:
                self._timer.cancel()
            self._schedule(until)

    def disarm(self) -> None:
        self._guard_until = math.inf

    def _schedule(self, until: float) -> None:
        delay = max(0.0, until - time.monotonic())
        self._timer = asyncio.get_running_loop().call_later(delay, self._fire)
        self._timer_at = until

    def _fire(self) -> None:
        self._timer = None
        until = self._guard_until
        if until == math.inf or self._task is None:
            return
        if time.monotonic() < until:
            self._schedule(until)
            return
        self.expired = self._guard_which
        self._task.cancel()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def start_attempt(self) -> None:
        self._first_at = time.monotonic() + self.timeouts.first_token

    def mark_token(self) -> None:
        self.first_token_seen = True

    def remaining_total(self) -> float:
        return self._total_at - time.monotonic()

    def next_wait(self) -> tuple[float, str]:
        now = time.monotonic()
        if not self.streaming:
            return self._total_at - now, "total"
        if self.first_token_seen:
            until, which = now + self.timeouts.idle, "idle"
        else:
            until, which = self._first_at, "first_token"
        if self._total_at <= until:
            return self._total_at - now, "total"
        return until - now, which


def timeout_error(conn: Connection, which: str) -> ProviderTimeout:
    t = conn.timeouts
    text = {
        "connect": f"could not connect within {t.connect:g}s",
        "first_token": f"no first token within {t.first_token:g}s",
        "idle": f"no data for {t.idle:g}s in the middle of the answer",
        "total": f"the request took longer than {t.total:g}s",
    }[which]
    return ProviderTimeout(f"{label(conn)}: {text}", which=which, retryable=which == "connect")


async def within(aw: Awaitable[T], dl: Deadlines, conn: Connection) -> T:
    """Await under the deadline that applies now; on expiry raise ProviderTimeout(which)."""
    wait, which = dl.next_wait()
    if wait <= 0:
        if asyncio.iscoroutine(aw):
            aw.close()
        raise timeout_error(conn, which)
    task = asyncio.current_task()
    cancelling = task.cancelling() if task is not None else 0
    dl.expired = None
    dl.arm(time.monotonic() + wait, which, task)
    try:
        return await aw
    except asyncio.CancelledError:
        if dl.expired is not None and task is not None and task.uncancel() <= cancelling:
            raise timeout_error(conn, dl.expired) from None
        raise
    finally:
        dl.disarm()


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """`retry-after-ms`, or `Retry-After` as seconds or an HTTP date."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def upstream_message(raw: bytes) -> str:
    """The human part of an upstream error body (OpenAI, Anthropic, KoboldCpp, FastAPI shapes)."""
    try:
        body: Any = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw.decode("utf-8", "replace").strip()[:500]
    for key in ("error", "detail", "message"):
        value = body.get(key) if isinstance(body, dict) else None
        if isinstance(value, str) and value:
            return value[:500]
        if isinstance(value, list) and value and isinstance(value[0], dict):
            value = value[0]
        if isinstance(value, dict):
            for inner in ("message", "msg", "detail"):
                if isinstance(value.get(inner), str) and value[inner]:
                    return str(value[inner])[:500]
    return raw.decode("utf-8", "replace").strip()[:500]


def is_retryable_status(status: int) -> bool:
    return status in (408, 425, 429) or status >= 500


def http_error(
    conn: Connection, status: int, message: str, headers: Mapping[str, str] | None = None
) -> ProviderHTTPError:
    clean = redact(message) or "(no message)"
    details: dict[str, Any] = {"upstream_status": status, "upstream_message": clean}
    retry_after = retry_after_seconds(headers or {})
    if retry_after is not None:
        details["retry_after"] = retry_after
    err = ProviderHTTPError(
        f"{label(conn)}: upstream answered HTTP {status}: {clean}",
        retryable=is_retryable_status(status),
        **details,
    )
    err.upstream_status = status  # type: ignore[attr-defined]
    return err


def _request_timeout(t: Timeouts) -> httpx.Timeout:
    # reads are bounded by Deadlines (first token / idle / total), not by httpx
    return httpx.Timeout(connect=t.connect, read=None, write=max(t.connect, t.idle), pool=t.connect)


@asynccontextmanager
async def open_response(
    client: httpx.AsyncClient,
    wire: WireRequest,
    headers: Mapping[str, str],
    dl: Deadlines,
    conn: Connection,
    url: str | None = None,
) -> AsyncIterator[httpx.Response]:
    """Send `wire` with real headers (and the real `url`: `wire.url` has its secrets
    masked); yield the streaming response (status < 400).

    Leaving the block for any reason (end, error, cancellation) closes the response, which
    closes the socket when the body was not read to the end.
    """
    try:
        request = client.build_request(
            wire.method, url or wire.url, headers=headers, content=orjson.dumps(wire.body),
            timeout=_request_timeout(conn.timeouts),
        )
    except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
        raise ProviderConnectionError(f"{label(conn)}: bad base URL: {exc}") from None
    try:
        response = await within(client.send(request, stream=True), dl, conn)
    except (httpx.ConnectTimeout, httpx.PoolTimeout):
        raise timeout_error(conn, "connect") from None
    except httpx.UnsupportedProtocol as exc:
        raise ProviderConnectionError(f"{label(conn)}: bad base URL: {exc}") from None
    except httpx.TransportError as exc:
        raise ProviderConnectionError(
            f"{label(conn)}: connection failed: {redact(str(exc) or type(exc).__name__)}",
            retryable=True,
        ) from None
    try:
        if response.status_code >= 400:
            raw = await within(response.aread(), dl, conn)
            raise http_error(conn, response.status_code, upstream_message(raw), response.headers)
        yield response
    except httpx.TransportError as exc:
        what = redact(str(exc) or type(exc).__name__)
        raise ProviderConnectionError(
            f"{label(conn)}: the connection broke during the answer: {what}",
            retryable=not dl.first_token_seen,
        ) from None
    finally:
        await response.aclose()


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


@asynccontextmanager
async def open_stream(
    client: httpx.AsyncClient,
    streams: StreamClient,
    wire: WireRequest,
    headers: Mapping[str, str],
    dl: Deadlines,
    conn: Connection,
    url: str | None = None,
) -> AsyncIterator[StreamResponse | HttpxBody]:
    """Send `wire` and yield its response (status < 400) to `read()` chunk by chunk or
    `aread()` whole: through `streams` (one parser callback per network read), or through
    httpx when a proxy applies."""
    target = url or wire.url
    if proxied(target):
        async with open_response(client, wire, headers, dl, conn, url) as response:
            yield HttpxBody(response)
        return
    body = orjson.dumps(wire.body)
    try:
        response = await within(
            streams.send(wire.method, target, headers, body, conn.timeouts.connect), dl, conn)
    except ValueError as exc:
        raise ProviderConnectionError(f"{label(conn)}: {redact(str(exc))}") from None
    except TimeoutError:
        raise timeout_error(conn, "connect") from None
    except StreamError as exc:
        raise ProviderConnectionError(
            f"{label(conn)}: connection failed: {redact(str(exc))}", retryable=True) from None
    try:
        if response.status_code >= 400:
            raw = await within(response.aread(), dl, conn)
            raise http_error(conn, response.status_code, upstream_message(raw), response.headers)
        yield response
    except StreamError as exc:
        raise ProviderConnectionError(
            f"{label(conn)}: the connection broke during the answer: {redact(str(exc))}",
            retryable=not dl.first_token_seen,
        ) from None
    finally:
        await response.aclose()


async def sse_events(
    response: StreamResponse | HttpxBody, dl: Deadlines, conn: Connection
) -> AsyncIterator[SSEEvent]:
    """SSE events of a streaming response, each read under the deadline that applies.

    The hot path of a relayed answer: one read per network chunk, guarded inline (what
    `within` does, without a coroutine per read).
    """
    decoder = SSEDecoder()
    decode = codecs.getincrementaldecoder("utf-8")(errors="replace").decode
    read = response.read
    task = asyncio.current_task()
    while True:
        wait, which = dl.next_wait()
        if wait <= 0:
            raise timeout_error(conn, which)
        cancelling = task.cancelling() if task is not None else 0
        dl.expired = None
        dl.arm(time.monotonic() + wait, which, task)
        try:
            chunk = await read()
        except asyncio.CancelledError:
            if dl.expired is not None and task is not None and task.uncancel() <= cancelling:
                raise timeout_error(conn, dl.expired) from None
            raise
        finally:
            dl.disarm()
        if not chunk:
            break
        for event in decoder.feed(decode(chunk)):
            yield event
    for event in decoder.feed(decode(b"", final=True)) + decoder.flush():
        yield event


async def drain(rest: AsyncIterator[object], limit: float = 0.1) -> None:
    """Read what follows the end of an answer (`[DONE]`, the chunk terminator) so the
    keep-alive connection goes back to the pool; give up quickly and let it close."""
    try:
        async with asyncio.timeout(limit):
            async for _ in rest:
                pass
    except (TimeoutError, ProviderError):
        pass


def retry_delay(conn: Connection, err: ProviderError, tries: int) -> float:
    delay = conn.retry_backoff * (2**tries) * (1 + random.random() * 0.25)
    delay = min(delay, _BACKOFF_CEILING)
    retry_after = err.details.get("retry_after")
    if isinstance(retry_after, int | float):
        delay = max(delay, min(float(retry_after), conn.retry_after_cap))
    return delay


async def retrying(
    conn: Connection, dl: Deadlines, attempt: Callable[[], AsyncIterator[T]]
) -> AsyncIterator[T]:
    """Run `attempt` until it succeeds; retry a retryable ProviderError only while nothing
    has been yielded yet (before the first token), at most `conn.retries` times."""
    tries = 0
    while True:
        dl.start_attempt()
        try:
            async with aclosing(attempt()) as items:
                async for item in items:
                    dl.mark_token()
                    yield item
            return
        except ProviderError as err:
            if dl.first_token_seen or not err.retryable or tries >= conn.retries:
                raise
            delay = retry_delay(conn, err, tries)
            if delay >= dl.remaining_total():
                raise
            log.warning(
                "provider.retry", kind=conn.kind, connection=conn.name, attempt=tries + 1,
                delay=round(delay, 3), error=err.code,
                status=err.details.get("upstream_status"),
            )
            await asyncio.sleep(delay)
            tries += 1
        finally:
            dl.close()
