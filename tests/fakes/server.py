"""A tiny HTTP/1.1 server on loopback, run in its own thread and event loop, that hands each
request to an async handler and sees at once when a client goes away.

Must not: bind anything but a loopback address.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Self

import orjson

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})
_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
            408: "Request Timeout", 429: "Too Many Requests", 500: "Internal Server Error",
            502: "Bad Gateway", 503: "Service Unavailable", 529: "Overloaded"}


class ClientGone(Exception):
    """The client closed the connection while the handler was still answering."""


@dataclass
class RecordedRequest:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes
    at: float = field(default_factory=time.monotonic)

    @property
    def json(self) -> Any:
        try:
            return orjson.loads(self.body) if self.body else None
        except orjson.JSONDecodeError:
            return None


class Exchange:
    """One request and the means to answer it (whole, streamed in chunks, or by a reset)."""

    def __init__(self, conn: _Conn, request: RecordedRequest) -> None:
        self.request = request
        self._conn = conn
        self._chunked = False
        self.started = False
        self.done = False

    @property
    def gone(self) -> bool:
        return self._conn.gone.is_set()

    def _head(self, status: int, headers: dict[str, str]) -> bytes:
        lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

    def send(self, status: int, body: bytes, content_type: str = "application/json",
             headers: dict[str, str] | None = None) -> None:
        head = {"Content-Type": content_type, "Content-Length": str(len(body)), **(headers or {})}
        self.started = True
        self._conn.write(self._head(status, head) + body)
        self.done = True

    def send_json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        self.send(status, orjson.dumps(obj), headers=headers)

    def start_stream(self, status: int = 200, content_type: str = "text/event-stream",
                     headers: dict[str, str] | None = None, first: bytes = b"") -> None:
        """The head of a chunked answer, and `first`, the body's first chunk (as it goes on
        the wire), in the same network write when given."""
        head = {"Content-Type": content_type, "Transfer-Encoding": "chunked",
                "Cache-Control": "no-cache", **(headers or {})}
        self.started = True
        self._conn.write(self._head(status, head)
                         + (b"%x\r\n%s\r\n" % (len(first), first) if first else b""))
        self._chunked = True

    def write(self, data: str | bytes) -> None:
        raw = data.encode() if isinstance(data, str) else data
        if raw:
            self._conn.write(b"%x\r\n%s\r\n" % (len(raw), raw))

    def end_stream(self) -> None:
        if self._chunked and not self.done:
            self._conn.write(b"0\r\n\r\n")
        self.done = True

    async def drain(self) -> None:
        """Wait while the client does not read (the socket's send buffer is full); raise
        ClientGone when it leaves meanwhile."""
        await self._conn.drain()

    def reset(self) -> None:
        """Drop the connection with a TCP RST (no orderly end of the body)."""
        self._conn.reset()
        self.done = True

    async def sleep(self, seconds: float) -> None:
        """Wait, but raise ClientGone as soon as the client leaves."""
        if seconds <= 0:
            if self.gone:
                raise ClientGone()
            return
        try:
            await asyncio.wait_for(self._conn.gone.wait(), None if seconds == float("inf")
                                   else max(0.0, seconds))
        except TimeoutError:
            return
        raise ClientGone()


Handler = Callable[[Exchange], Awaitable[None]]


class _Conn(asyncio.Protocol):
    def __init__(self, server: LoopbackServer) -> None:
        self.server = server
        self.buf = bytearray()
        self.more = asyncio.Event()
        self.gone = asyncio.Event()
        self.eof = False
        self.answering = False
        self.transport: asyncio.Transport | None = None
        self.task: asyncio.Task[None] | None = None
        self.writable = asyncio.Event()
        self.writable.set()
        self.reset_by_us = False
        """The fake dropped the connection itself (a scripted fault), not the client."""

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()

    async def drain(self) -> None:
        while not self.writable.is_set():
            if self.gone.is_set():
                raise ClientGone()
            waiter = asyncio.ensure_future(self.writable.wait())
            gone = asyncio.ensure_future(self.gone.wait())
            try:
                await asyncio.wait({waiter, gone}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiter.cancel()
                gone.cancel()
        if self.gone.is_set():
            raise ClientGone()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.server._opened(self)
        self.task = asyncio.get_running_loop().create_task(self.serve())

    def data_received(self, data: bytes) -> None:
        self.buf += data
        self.more.set()

    def eof_received(self) -> bool:
        self.eof = True
        self._left()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self._left()
        self.server._closed(self)

    def _left(self) -> None:
        if not self.gone.is_set():
            self.gone.set()
            self.more.set()
            if self.answering:
                self.server._client_left_mid_answer()

    def write(self, data: bytes) -> None:
        if self.gone.is_set() or self.transport is None:
            raise ClientGone()
        if self.transport.is_closing():
            # The client reset the connection and the transport is closing, but
            # `connection_lost` has not run yet: the client left all the same, and the
            # handler must not stop answering before that is recorded.
            if not self.reset_by_us:
                self._left()
            raise ClientGone()
        self.transport.write(data)
        self.server.bytes_written += len(data)

    def reset(self) -> None:
        if self.transport is None:
            return
        self.reset_by_us = True
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.transport.abort()

    async def _fill(self) -> bool:
        if self.eof:
            return False
        self.more.clear()
        await self.more.wait()
        return True

    async def read_until(self, sep: bytes, limit: int = 1 << 16) -> bytes | None:
        while (i := self.buf.find(sep)) < 0:
            if len(self.buf) > limit or not await self._fill():
                return None
        out = bytes(self.buf[: i + len(sep)])
        del self.buf[: i + len(sep)]
        return out

    async def read_exact(self, n: int) -> bytes | None:
        while len(self.buf) < n:
            if not await self._fill():
                return None
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    async def read_request(self) -> RecordedRequest | None:
        head = await self.read_until(b"\r\n\r\n")
        if head is None:
            return None
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        path, _, query = target.partition("?")
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                size_line = await self.read_until(b"\r\n")
                if size_line is None:
                    return None
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                chunk = await self.read_exact(size + 2)
                if chunk is None:
                    return None
                if size == 0:
                    break
                body += chunk[:-2]
        else:
            body = await self.read_exact(int(headers.get("content-length", "0") or 0)) or b""
        return RecordedRequest(method, path, query, headers, body)

    async def serve(self) -> None:
        try:
            while not self.gone.is_set():
                request = await self.read_request()
                if request is None:
                    break
                self.server.requests.append(request)
                exchange = Exchange(self, request)
                self.answering = True
                try:
                    await self.server.handler(exchange)
                    if not exchange.done:
                        exchange.end_stream()
                except ClientGone:
                    break
                except Exception as exc:  # noqa: BLE001 - a broken fake must not hang a test
                    self.server.errors.append(exc)
                    if exchange.started:
                        self.reset()
                        break
                    exchange.send_json(500, {"error": {"message": f"fake crashed: {exc!r}"}})
                finally:
                    self.answering = False
                if request.headers.get("connection", "").lower() == "close":
                    break
        finally:
            if self.transport is not None and not self.transport.is_closing():
                self.transport.close()


class LoopbackServer:
    """Start with `start()` (or `with`); `url` is `http://127.0.0.1:<random port>`."""

    def __init__(self, handler: Handler, host: str = "127.0.0.1", port: int = 0) -> None:
        if host not in LOOPBACK_HOSTS:
            raise ValueError(f"fake servers bind loopback only, not {host!r}")
        self.handler = handler
        self.host = "127.0.0.1" if host == "localhost" else host
        self.port = port
        self.requests: list[RecordedRequest] = []
        self.errors: list[Exception] = []
        self.open_connections = 0
        self.connections_total = 0
        self.bytes_written = 0
        """Bytes handed to the sockets so far (all connections)."""
        self.disconnect_times: list[float] = []
        self.client_left = threading.Event()
        self._conns: set[_Conn] = set()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    # bookkeeping, called on the server's loop
    def _opened(self, conn: _Conn) -> None:
        with self._lock:
            self._conns.add(conn)
            self.open_connections += 1
            self.connections_total += 1

    def _closed(self, conn: _Conn) -> None:
        with self._lock:
            if conn in self._conns:
                self._conns.discard(conn)
                self.open_connections -= 1

    def _client_left_mid_answer(self) -> None:
        self.disconnect_times.append(time.monotonic())
        self.client_left.set()

    # lifecycle
    def start(self) -> Self:
        self._thread = threading.Thread(target=self._run, name="loopback-fake", daemon=True)
        self._thread.start()
        if not self._ready.wait(5):
            raise RuntimeError("the fake server did not start")
        return self

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._server = loop.run_until_complete(
            loop.create_server(lambda: _Conn(self), self.host, self.port)
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.close()

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self._conns):
            if conn.transport is not None:
                conn.transport.abort()
            if conn.task is not None:
                conn.task.cancel()
        tasks = [c.task for c in self._conns if c.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=1)

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        future = asyncio.run_coroutine_threadsafe(self._shutdown(), loop)
        with contextlib.suppress(Exception):  # shutting down regardless
            future.result(timeout=3)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=3)
        self._loop = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # waiting from tests (sync or async)
    def wait_client_left(self, timeout: float) -> bool:
        return self.client_left.wait(timeout)

    async def await_client_left(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not self.client_left.is_set():
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.002)
        return True


class Served:
    """What a fake built on a `LoopbackServer` (its `server`) offers: start and stop, a `with`
    block, and the server's `url`."""

    server: LoopbackServer

    def start(self) -> Self:
        self.server.start()
        return self

    def stop(self) -> None:
        self.server.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return self.server.url
