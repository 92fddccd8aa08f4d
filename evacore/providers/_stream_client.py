"""A lean HTTP/1.1 client for streamed answers: an asyncio protocol per connection, the
llhttp parser (`httptools`, the one uvicorn uses) in C, and a keep-alive pool per origin.

Relaying a paced answer means one network read per token. Through httpx each read passes
httpcore, anyio and h11 (about 200 µs of CPU per read on this kind of machine); here a read
is the parser's callback appending the body bytes and waking the reader, nothing more.

Must not: follow redirects, retry, time out or know a vendor's format: the request
discipline (`_transport.py`) does all of that around it, by cancelling the reading task.
A connection is reused only when its last response was read to the end and the server
allows it; anything else (an abort, an error, a cut body) closes it.
"""

from __future__ import annotations

import asyncio
import ssl
import time
import zlib
from collections.abc import Callable, Mapping

import httptools
import httpx

KEEPALIVE_SECONDS = 30.0
MAX_IDLE_PER_ORIGIN = 128
"""Kept-alive connections per origin past which a finished one is closed instead."""
PAUSE_AT_BYTES = 256 * 1024
"""Unread body bytes past which the socket is not read on (TCP back-pressure)."""


class StreamError(Exception):
    """The connection failed or broke; `received` says whether any response byte arrived."""

    def __init__(self, message: str, *, received: bool) -> None:
        super().__init__(message)
        self.received = received


class _Conn(asyncio.Protocol):
    """One TCP (or TLS) connection: parses the response of the request in flight."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self._reset()

    def _reset(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.status = 0
        self.raw_headers: list[tuple[bytes, bytes]] = []
        self.head: asyncio.Future[None] = self.loop.create_future()
        self.chunks: list[bytes] = []  # a list: a deque allocates 0.5 KB before its first item
        self.buffered = 0
        self.complete = False
        self.keep_alive = False
        self.received = False
        self.error: StreamError | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.paused = False
        self.tap: Callable[[bytes], bool] | None = None
        """Offered each body chunk that arrives while the reader waits with nothing
        unread; True when it took the chunk (the reader never sees it)."""
        self.early: Callable[[bytes], bool] | None = None
        """The sender's tap for the body chunks that come with the head, before the sender
        took the head (`send`'s `early`): offered them as `tap` is, only for a 2xx answer
        whose body comes as sent (no content encoding)."""

    # --- asyncio.Protocol -----------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.received = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail("the upstream switched protocols")
        except httptools.HttpParserError as exc:
            self._fail(f"malformed HTTP from the upstream: {exc}")

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if not self.complete and self.error is None:
            if exc is None and self.head.done() and self._ends_with_connection():
                # a body delimited by the end of the connection: that end completes it
                # (httptools has no call that tells its parser so)
                self.keep_alive = False
                self.complete = True
            else:
                self._fail("the upstream closed the connection"
                           + (f": {exc}" if exc else ""))
        self._wake()
        # the parser holds this protocol's callbacks, a cycle only the garbage collector's
        # full pass would free; nothing is parsed after the connection is gone
        del self.parser

    def _as_sent(self) -> bool:
        """The body comes as the upstream wrote it: no content encoding to undo."""
        return all(value.strip().lower() in (b"", b"identity")
                   for name, value in self.raw_headers if name.lower() == b"content-encoding")

    def _ends_with_connection(self) -> bool:
        """The response's body has neither a length nor chunks: it runs to the close."""
        names = {name.lower() for name, _ in self.raw_headers}
        return b"content-length" not in names and b"transfer-encoding" not in names

    # --- httptools callbacks --------------------------------------------------------------
    def on_header(self, name: bytes, value: bytes) -> None:
        self.raw_headers.append((name, value))

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        if self.early is not None and not (200 <= self.status < 300 and self._as_sent()):
            self.early = None  # an error's body, or one to inflate: the sender reads it
        if not self.head.done():
            self.head.set_result(None)

    def on_body(self, body: bytes) -> None:
        tap = self.tap
        if tap is not None and not self.chunks:
            waiter = self.waiter
            if waiter is not None and not waiter.done() and tap(body):
                return
        elif self.early is not None and not self.chunks and self.early(body):
            return  # came with the head: taken before the sender wakes for it
        self.chunks.append(body)
        self.buffered += len(body)
        if self.buffered >= PAUSE_AT_BYTES and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def on_message_complete(self) -> None:
        self.keep_alive = self.parser.should_keep_alive()  # valid in this callback only
        self.complete = True
        self._wake()

    # --- the reader's side ----------------------------------------------------------------
    def _fail(self, message: str) -> None:
        if self.error is None:
            self.error = StreamError(message, received=self.received)
        if not self.head.done():
            self.head.set_exception(self.error)
            self.head.exception()  # retrieved here: the sender re-raises it
        if self.transport is not None:
            self.transport.close()
        self._wake()

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def read(self) -> bytes:
        """The body bytes that arrived since the last read (waits for some); b"" at the end."""
        while not self.chunks:
            if self.error is not None:
                raise self.error
            if self.complete:
                return b""
            self.waiter = self.loop.create_future()
            try:
                await self.waiter
            finally:
                self.waiter = None
        chunks = self.chunks
        data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        chunks.clear()
        self.buffered = 0
        if self.paused and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()
        return data

    def taps(self, tap: Callable[[bytes], bool] | None) -> None:
        """Offer the body chunks to `tap` first (None: stop offering)."""
        self.tap = tap

    def reusable(self) -> bool:
        return self.complete and self.keep_alive and self.error is None and not self.closed


class StreamResponse:
    """A response whose body is read chunk by chunk (`read`), or whole (`aread`)."""

    def __init__(self, client: StreamClient, key: tuple[str, str, int], conn: _Conn) -> None:
        self._client, self._key, self._conn = client, key, conn
        self.status_code = conn.status
        self.headers = httpx.Headers([(k.decode("latin-1"), v.decode("latin-1"))
                                      for k, v in conn.raw_headers])
        encoding = self.headers.get("content-encoding", "identity").lower().strip()
        self._inflate = (zlib.decompressobj(16 + zlib.MAX_WBITS) if encoding == "gzip"
                         else zlib.decompressobj() if encoding == "deflate" else None)
        if encoding not in ("", "identity", "gzip", "deflate"):
            raise StreamError(f"unsupported content encoding {encoding!r}", received=True)
        if self._inflate is None:
            self.read = conn.read  # type: ignore[method-assign]  # no layer per chunk
            self.tap_body = conn.taps
            """Offer raw body chunks to a tap (only when nothing is inflated)."""
        self._closed = False

    async def read(self) -> bytes:
        data = await self._conn.read()
        if self._inflate is not None:
            data = self._inflate.decompress(data) if data else self._inflate.flush()
        return data

    async def aread(self) -> bytes:
        parts = []
        while data := await self.read():
            parts.append(data)
        return b"".join(parts)

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._client._release(self._key, self._conn)


class StreamClient:
    """Connections to upstreams, kept alive per origin for `KEEPALIVE_SECONDS`."""

    def __init__(self, ssl_context: ssl.SSLContext | None = None) -> None:
        self._ssl = ssl_context
        self._idle: dict[tuple[str, str, int], list[_Conn]] = {}
        self._targets: dict[str, tuple[tuple[str, str, int], str, str]] = {}
        self._via_proxy: httpx.AsyncClient | None = None

    def via_proxy(self) -> httpx.AsyncClient:
        """An httpx client with the environment's proxies (`HTTPS_PROXY`…), made on first
        use, for the requests the environment sends through a proxy."""
        if self._via_proxy is None:
            self._via_proxy = httpx.AsyncClient(timeout=None, follow_redirects=False,
                                                trust_env=True)
        return self._via_proxy

    def _tls(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = httpx.create_ssl_context()
        return self._ssl

    async def send(self, method: str, url: str, headers: Mapping[str, str], body: bytes,
                   connect_timeout: float, early: Callable[[bytes], bool] | None = None
                   ) -> StreamResponse:
        """Send the request and wait for the response's head. Raises `ValueError` for a URL
        this client cannot reach, `TimeoutError` when connecting takes too long and
        `StreamError` for a connection that failed before the head arrived.

        `early` is offered the body chunks of a 2xx answer with no content encoding that
        arrive with its head, before this wakes for it (the body tap the reader offers
        next, `StreamResponse.tap_body`): what it takes the reader never sees, so a body
        that comes with its head is not held for the sender's wake-up."""
        key, target, host = self._target(url)
        for name, value in headers.items():
            if any(c in f"{name}{value}" for c in "\r\n\0"):
                raise ValueError(f"the header {name!r} holds a line break or NUL")
        lines = [f"{method} {target} HTTP/1.1", f"Host: {host}",
                 f"Content-Length: {len(body)}"]
        given = {k.lower() for k in headers}
        if "accept-encoding" not in given:
            lines.append("Accept-Encoding: gzip, deflate")
        if "user-agent" not in given:
            lines.append("User-Agent: evacore")
        lines += [f"{k}: {v}" for k, v in headers.items() if k.lower() != "content-length"]
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8")
        for reused in (True, False):
            conn = self._take_idle(key) if reused else None
            if reused and conn is None:
                continue
            if conn is None:
                conn = await self._connect(key, connect_timeout)
            assert conn.transport is not None
            conn.early = early
            conn.transport.write(head + body)
            try:
                await conn.head
            except StreamError as exc:
                conn.transport.close()
                if reused and not exc.received:
                    continue  # the kept-alive connection had been closed: a fresh one
                raise
            except BaseException:
                conn.transport.close()
                raise
            finally:
                conn.early = None
            return StreamResponse(self, key, conn)
        raise AssertionError("unreachable")  # pragma: no cover

    def _target(self, url: str) -> tuple[tuple[str, str, int], str, str]:
        """(origin key, request target, Host header) of `url`, parsed once per URL."""
        known = self._targets.get(url)
        if known is not None:
            return known
        try:
            parsed = httpx.URL(url)
        except httpx.InvalidURL as exc:
            raise ValueError(f"bad base URL: {exc}") from None
        scheme = parsed.scheme
        if scheme not in ("http", "https") or not parsed.host:
            raise ValueError(f"bad base URL: {url!r} is not an http(s) URL with a host")
        port = parsed.port or (443 if scheme == "https" else 80)
        known = ((scheme, parsed.host, port), parsed.raw_path.decode("ascii"),
                 parsed.netloc.decode("ascii"))
        if len(self._targets) >= 1024:
            self._targets.clear()
        self._targets[url] = known
        return known

    async def _connect(self, key: tuple[str, str, int], timeout: float) -> _Conn:
        loop = asyncio.get_running_loop()
        scheme, host, port = key
        tls = self._tls() if scheme == "https" else None
        try:
            async with asyncio.timeout(timeout):
                _, conn = await loop.create_connection(
                    lambda: _Conn(loop), host.strip("[]"), port, ssl=tls,
                    server_hostname=host.strip("[]") if tls else None)
        except OSError as exc:
            raise StreamError(str(exc) or type(exc).__name__, received=False) from None
        return conn

    def _take_idle(self, key: tuple[str, str, int]) -> _Conn | None:
        idle = self._idle.get(key)
        now = time.monotonic()
        while idle:
            conn = idle.pop()
            if not conn.closed and now - conn.idle_since < KEEPALIVE_SECONDS:
                conn._reset()
                return conn
            if conn.transport is not None:
                conn.transport.close()
        return None

    def _release(self, key: tuple[str, str, int], conn: _Conn) -> None:
        if not conn.reusable():
            if conn.transport is not None:
                conn.transport.close()
            return
        idle = self._idle.setdefault(key, [])
        now = time.monotonic()
        idle[:] = [c for c in idle if not c.closed and now - c.idle_since < KEEPALIVE_SECONDS]
        if len(idle) >= MAX_IDLE_PER_ORIGIN:
            conn.transport.close()  # type: ignore[union-attr]
            return
        conn.idle_since = now
        idle.append(conn)

    async def aclose(self) -> None:
        if self._via_proxy is not None:
            await self._via_proxy.aclose()
        for conns in self._idle.values():
            for conn in conns:
                if conn.transport is not None:
                    conn.transport.close()
        self._idle.clear()
