"""The raw ASGI response that writes a tour's frames as they come (every channel that
streams over HTTP: the generate route, the OpenAI-compatible facade).

Must not: decide what is sent or frame it (the channel does); it only writes the frames.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from contextlib import aclosing
from typing import Any

import orjson
from starlette.responses import Response

from evacore.eager import Resumed, run_until_wait
from evacore.pipeline.events import Batch, EventSink

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class TextFrame:
    """A channel's frame of one delta's text alone: `start`, the text as a JSON string,
    `end`. `start` is None while the channel cannot frame a text alone (the facade, before
    its first chunk went out: `open` sets it then); `sent`, when not None, is the channel's
    list of the texts its client was sent, and a text written in this frame is added to it."""

    __slots__ = ("end", "sent", "size", "start", "tail")

    def __init__(self, start: bytes | None, end: bytes, sent: list[str] | None = None) -> None:
        self.end = end
        self.tail = end + b"\r\n"
        """`end` and the end of the chunk that carries the frame."""
        self.sent = sent
        self.start: bytes | None = None
        self.size = 0
        """The frame's bytes besides the text's JSON."""
        if start is not None:
            self.open(start)

    def open(self, start: bytes) -> None:
        """From now on a text can be framed alone, after `start`."""
        self.start = start
        self.size = len(start) + len(self.end)


class LastChunk(bytes):
    """A channel's frame that ends its stream: it goes out with the response's end in one
    write (the channel knows nothing follows it)."""

    __slots__ = ()


_CHUNK_HEADS = [b"%x\r\n" % size for size in range(2048)]
"""The head of an HTTP/1.1 chunk of each size a relayed token's frame usually has (its size
in hex and a line end): looked up, not formatted, for every token."""


class EventStream(Response):
    """A `text/event-stream` response: each chunk of `frames` is one body message, sent
    straight to the server (no task group, no extra queue), or written to the connection
    itself where the server allows it (`direct_body_writer`).

    With `write_through` (the tour's sink and the channel's framing of a batch), a token
    that comes alone is written from the tour's own task (`EventSink.relay`), or from the
    network read that brought it (`EventSink.write_now`, the fast lane). `text_frame`, the
    channel's frame of one delta's text alone, lets that read write the token with nothing
    made on the way (`EventSink.text_lane`).

    With `head_with_first_chunk`, the response's head goes out with its first chunk,
    whoever writes it (the frames, the tour's task or the network read), so a channel can
    still answer otherwise until then: `frames` may yield a `Response` before its first
    chunk, which is sent instead.

    A client that goes away fires `on_gone` at once, even while no frame is due (the
    frames usually wait for the tour's next event); `on_end` runs however the response
    ends. A `LastChunk` from `frames` goes out with the response's end. A slow reader
    slows the frames: the server's `send` waits while its write buffer is full.

    `watching`, when given, is the channel's own watch for the client's leaving, begun
    before the response (a future that finishes when the disconnect comes, and that acts
    on it itself): it is used, and cancelled at the end, instead of a new task of its own.
    """

    def __init__(self, frames: AsyncIterator[bytes | Response], headers: Mapping[str, str],
                 on_gone: Callable[[], None], on_end: Callable[[], None] | None = None,
                 media_type: str = "text/event-stream",
                 write_through: tuple[EventSink, Callable[[Batch], bytes]] | None = None,
                 head_with_first_chunk: bool = False,
                 text_frame: TextFrame | None = None,
                 watching: asyncio.Future[None] | None = None) -> None:
        self.frames, self.on_gone, self.on_end = frames, on_gone, on_end
        self.watching = watching
        self.write_through = write_through
        self.text_frame = text_frame
        self.head_with_first_chunk = head_with_first_chunk
        self.status_code = 200
        self.media_type = media_type
        self.background = None
        self.body = b""
        self.raw_headers = [(b"content-type", f"{media_type}; charset=utf-8".encode())] + [
            (k.lower().encode("latin-1"), str(v).encode("latin-1"))
            for k, v in {**SSE_HEADERS, **headers}.items()]

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        watcher = self.watching or asyncio.ensure_future(self._watch(receive))
        head = {"type": "http.response.start", "status": 200, "headers": self.raw_headers}
        started = not self.head_with_first_chunk
        last = b""
        """What goes out with the response's end: a `LastChunk` of the frames, else nothing."""
        try:
            if started:
                await send(head)
            direct = direct_body_writer(send)
            with_head = head_writer(send) if direct else None

            async def body(chunk: bytes) -> None:
                nonlocal started
                if not started:
                    started = True
                    if with_head is not None and await with_head(head, chunk):
                        return
                    await send(head)
                if not (direct and direct(chunk)):
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})

            if self.write_through is not None:
                sink, frame = self.write_through

                async def write(batch: Batch) -> None:
                    chunk = frame(batch)
                    if chunk and not watcher.done():
                        await body(chunk)

                def now(batch: Batch) -> asyncio.Future[None] | None:
                    chunk = frame(batch)
                    if not chunk or watcher.done() or (started and direct and direct(chunk)):
                        return None
                    return _start(body(chunk), self.on_gone)

                text = (direct_text_writer(send, self.text_frame, watcher)
                        if direct and self.text_frame is not None else None)
                sink.write_through(write, now, text)
            async with aclosing(self.frames) as frames:
                async for chunk in frames:
                    if watcher.done():
                        break
                    if isinstance(chunk, Response):
                        if not started:  # nothing sent yet: answered as the channel says
                            started = True
                            await chunk(scope, receive, send)
                            return
                        continue
                    if isinstance(chunk, LastChunk):
                        last = chunk
                        break
                    await body(chunk)
            if not watcher.done():
                if not started:
                    started = True
                    await send(head)
                await send({"type": "http.response.body", "body": last, "more_body": False})
        finally:
            watcher.cancel()
            if self.write_through is not None:
                self.write_through[0].write_through(None)
            if self.on_end is not None:
                self.on_end()
        if self.background is not None:
            await self.background()

    async def _watch(self, receive: Any) -> None:
        await client_gone(receive)
        self.on_gone()


async def client_gone(receive: Any) -> None:
    """Return when the client closes its connection: every ASGI message after the request's
    body (read by then) is read and dropped until the disconnect (servers do not cancel the
    endpoint for it)."""
    while (await receive())["type"] != "http.disconnect":
        pass


def direct_body_writer(send: Any) -> Callable[[bytes], bool] | None:
    """For uvicorn's httptools server (the one `evacore serve` runs): a function that writes
    a body chunk of this started, chunked response straight to the connection's transport
    when the server's `send` would do nothing else (its writes not paused by a full buffer,
    the client there, the response open), and returns False otherwise, so the caller sends
    it the ordinary way (which waits for the buffer to drain). None for any other server.

    A relayed token is one such chunk: this spares it the `send` coroutine and its checks."""
    cycle = _cycle(send)
    if cycle is None:
        return None
    flow, transport = cycle.flow, cycle.transport

    def write(chunk: bytes) -> bool:
        # uvicorn's `send` for a body chunk: the same checks, in one expression
        if (flow.write_paused or cycle.disconnected or not cycle.chunked_encoding
                or not cycle.response_started or cycle.response_complete):
            return False
        transport.write(b"%x\r\n%b\r\n" % (len(chunk), chunk))
        return True

    return write


class _Held:
    """A transport's stand-in while the server's `send` makes a response's head: what it
    writes is kept, to go out with the first chunk in one write."""

    __slots__ = ("data",)

    def __init__(self) -> None:
        self.data: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.data.append(data)


def head_writer(send: Any) -> Callable[[Any, bytes], Coroutine[Any, Any, bool]] | None:
    """For uvicorn's httptools server: a function that sends the response's head (its
    `http.response.start` message, through the server's own `send`, which checks and frames
    it) and the body's first chunk in one write to the connection, and says whether it did:
    one system call and one segment where the head and the chunk would take two each. False
    (nothing sent) when the connection would not take the head at once (its writes paused,
    the client gone, a response already started); the caller then sends both the ordinary
    way. None for any other server."""
    cycle = _cycle(send)
    if cycle is None:
        return None

    async def write(head: Any, chunk: bytes) -> bool:
        if cycle.flow.write_paused or cycle.disconnected or cycle.response_started:
            return False
        transport, held = cycle.transport, _Held()
        cycle.transport = held
        try:
            # the server's send writes the head and returns without waiting: nothing else
            # runs meanwhile, so nothing else meets the stand-in
            await send(head)
        finally:
            cycle.transport = transport
        if cycle.chunked_encoding and chunk:
            held.data.append(b"%x\r\n%b\r\n" % (len(chunk), chunk))
            chunk = b""
        transport.write(b"".join(held.data))
        if chunk:  # a response the server does not chunk: the chunk goes the ordinary way
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        return True

    return write


def direct_text_writer(send: Any, frame: TextFrame, watcher: asyncio.Future[None]
                       ) -> Callable[[str], bool] | None:
    """`direct_body_writer` and the channel's frame of one delta's text in one step: writes
    the text in `frame` as one chunk when the connection takes it at once, the stream's
    watcher has not seen the client go and the channel frames a text alone (False, with
    nothing made, otherwise). A relayed token's whole way to the socket: its JSON, its
    frame and the chunk around it joined at once, written in one call."""
    cycle = _cycle(send)
    if cycle is None:
        return None
    flow, transport, dumps, done = cycle.flow, cycle.transport, orjson.dumps, watcher.done
    opened = False
    """The response's chunked body began (once so, it stays so)."""

    def write(text: str) -> bool:
        nonlocal opened
        start = frame.start
        if (start is None or not text or done() or flow.write_paused or cycle.disconnected
                or cycle.response_complete):
            return False
        if not opened:
            if not (cycle.chunked_encoding and cycle.response_started):
                return False
            opened = True
        body = dumps(text)
        size = frame.size + len(body)
        transport.write(b"".join((_CHUNK_HEADS[size] if size < 2048 else b"%x\r\n" % size,
                                  start, body, frame.tail)))
        sent = frame.sent
        if sent is not None:
            sent.append(text)
        return True

    return write


def _cycle(send: Any) -> Any:
    """For `send` of uvicorn's httptools server, on a response with a body: its request's
    cycle, whose attributes say whether the connection takes a body chunk at once (its
    writes not paused by a full buffer, the client there, the chunked response started and
    not complete) and hold its transport. None for any other server or response."""
    cycle = getattr(send, "__self__", None)
    if type(cycle).__module__ != "uvicorn.protocols.http.httptools_impl" or not all(
            hasattr(cycle, name) for name in (
                "flow", "transport", "chunked_encoding", "disconnected", "response_started",
                "response_complete", "scope")) or cycle.scope.get("method") == "HEAD":
        return None
    return cycle


def _start(coro: Coroutine[Any, Any, None], on_error: Callable[[], None]
           ) -> asyncio.Future[None] | None:
    """Run a `send` up to its first wait: None when it finished (the usual case: the
    bytes went to the transport), else a task that finishes it in order. A send that
    fails ends the response as a client that went away would."""
    try:
        rest = run_until_wait(coro)
    except Exception:  # noqa: BLE001 - the connection is gone; the watcher sees it too
        on_error()
        return None
    return None if rest is None else asyncio.ensure_future(_finish(rest, on_error))


async def _finish(rest: Resumed, on_error: Callable[[], None]) -> None:
    try:
        await rest
    except Exception:  # noqa: BLE001 - as in `_start`
        on_error()
