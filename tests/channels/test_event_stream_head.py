"""A stream whose head waits for its first chunk (the OpenAI-compatible facade's): the head
goes out with that chunk whoever writes it (the network read's fast lane, the tour's task
or the channel's frames), and until then the channel may still answer otherwise; a last
chunk the channel marks goes out with the response's end."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from starlette.responses import JSONResponse, Response

from evacore.channels.event_stream import EventStream, LastChunk
from evacore.pipeline.events import Batch, EventSink


def _frame(batch: Batch) -> bytes:
    return b"".join(f"data: {d['text']}\n\n".encode() for n, d in batch if n == "delta")


class _Client:
    """The server's side of one request: what was sent, and a disconnect on demand."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.gone = asyncio.Event()

    async def receive(self) -> dict[str, Any]:
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    def kinds(self) -> list[Any]:
        return [m.get("status", m.get("body")) for m in self.sent]


async def _events(sink: EventSink) -> AsyncIterator[Batch]:
    async for batch in sink.batches():
        yield batch


async def _frames(sink: EventSink, answer_first: Response | None = None
                  ) -> AsyncIterator[bytes | Response]:
    if answer_first is not None:
        yield answer_first
    async for batch in _events(sink):
        chunk = _frame(batch)
        if chunk:
            yield chunk


async def _respond(stream: EventStream, client: _Client) -> asyncio.Task[None]:
    task = asyncio.ensure_future(stream({"type": "http", "method": "POST"}, client.receive,
                                        client.send))
    await asyncio.sleep(0)
    return task


async def test_the_fast_lane_writes_the_head_with_the_first_token_at_once() -> None:
    sink, client = EventSink(), _Client()
    stream = EventStream(_frames(sink), {}, on_gone=lambda: None,
                         write_through=(sink, _frame), head_with_first_chunk=True)
    task = await _respond(stream, client)
    sink.emit("tour", {"tour_id": "t"})  # nothing for the client: no head yet
    await asyncio.sleep(0)
    assert client.sent == []
    assert sink.write_now([("delta", {"text": "Hi"})])  # from a network read's callback
    assert client.kinds() == [200, b"data: Hi\n\n"]  # head and token, before any await
    assert sink.write_now([("delta", {"text": "!"})])
    sink.close()
    await task
    assert client.kinds() == [200, b"data: Hi\n\n", b"data: !\n\n", b""]


async def test_the_tours_own_write_and_the_frames_send_the_head_first_too() -> None:
    sink, client = EventSink(), _Client()
    stream = EventStream(_frames(sink), {}, on_gone=lambda: None,
                         write_through=(sink, _frame), head_with_first_chunk=True)
    task = await _respond(stream, client)
    assert await sink.relay("delta", {"text": "a"})  # the tour's task, a lone token
    sink.emit("delta", {"text": "b"})  # a burst: the frames write it
    sink.close()
    await task
    assert client.kinds() == [200, b"data: a\n\n", b"data: b\n\n", b""]

    sink, client = EventSink(), _Client()
    stream = EventStream(_frames(sink), {}, on_gone=lambda: None, head_with_first_chunk=True)
    task = await _respond(stream, client)
    sink.close()  # an answer with no chunk at all still gets its head and its end
    await task
    assert client.kinds() == [200, b""]


async def test_until_the_first_chunk_the_channel_may_answer_otherwise() -> None:
    sink, client = EventSink(), _Client()
    refusal = JSONResponse({"error": {"message": "upstream failed"}}, status_code=502)
    stream = EventStream(_frames(sink, refusal), {}, on_gone=lambda: None,
                         write_through=(sink, _frame), head_with_first_chunk=True)
    await (await _respond(stream, client))
    assert [m.get("status") for m in client.sent if m["type"] == "http.response.start"] == [502]
    assert b"upstream failed" in b"".join(m.get("body", b"") for m in client.sent)
    assert not sink.write_now([("delta", {"text": "late"})])  # the stream is over


async def test_a_client_gone_before_the_first_chunk_gets_nothing_and_is_told() -> None:
    sink, client = EventSink(), _Client()
    gone: list[bool] = []
    stream = EventStream(_frames(sink), {}, on_gone=lambda: gone.append(True),
                         write_through=(sink, _frame), head_with_first_chunk=True)
    task = await _respond(stream, client)
    client.gone.set()
    await asyncio.sleep(0.01)
    assert gone == [True]
    sink.emit("delta", {"text": "x"})
    sink.close()
    await task
    assert client.sent == []


async def test_without_the_option_the_head_goes_first() -> None:
    sink, client = EventSink(), _Client()
    stream = EventStream(_frames(sink), {}, on_gone=lambda: None, write_through=(sink, _frame))
    task = await _respond(stream, client)
    assert client.kinds() == [200]
    sink.close()
    await task


async def test_a_last_chunk_ends_the_response_in_the_same_message() -> None:
    pulled: list[bytes] = []

    async def frames() -> AsyncIterator[bytes]:
        for chunk in (b"data: a\n\n", LastChunk(b"data: end\n\n"), b"data: never\n\n"):
            pulled.append(chunk)
            yield chunk

    for head_first in (False, True):
        pulled.clear()
        client = _Client()
        stream = EventStream(frames(), {}, on_gone=lambda: None,
                             head_with_first_chunk=head_first)
        await (await _respond(stream, client))
        assert client.kinds() == [200, b"data: a\n\n", b"data: end\n\n"]
        assert client.sent[-1]["more_body"] is False  # the end is in the last chunk's send
        assert len(pulled) == 2  # nothing after the last chunk is asked for


async def test_a_watch_the_channel_began_is_the_stream_s_own() -> None:
    """Given the channel's own watch for the client's leaving (`watching`), the stream reads
    no message itself (no second watch), stops writing once that watch has seen the client
    go, and cancels it at the end when the client stayed."""
    sink, client = EventSink(), _Client()
    reads: list[int] = []

    async def receive() -> dict[str, Any]:
        reads.append(1)
        return await client.receive()

    watch: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    stream = EventStream(_frames(sink), {}, on_gone=lambda: None,
                         write_through=(sink, _frame), watching=watch)
    task = asyncio.ensure_future(stream({"type": "http"}, receive, client.send))
    sink.emit("delta", {"text": "a"})
    await asyncio.sleep(0.01)
    sink.close()
    await task
    assert client.kinds() == [200, b"data: a\n\n", b""]
    assert reads == [] and watch.cancelled()

    sink, client = EventSink(), _Client()
    gone: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    stream = EventStream(_frames(sink), {}, on_gone=lambda: None,
                         write_through=(sink, _frame), watching=gone)
    task = asyncio.ensure_future(stream({"type": "http"}, receive, client.send))
    await asyncio.sleep(0.01)
    gone.set_result(None)  # the channel's watch saw the client go
    sink.emit("delta", {"text": "late"})
    sink.close()
    await task
    assert b"data: late\n\n" not in [m.get("body") for m in client.sent]
    assert reads == []
