"""The direct body write of a streamed response (`direct_body_writer`): on uvicorn's
httptools server a chunk goes straight to the connection, framed exactly as the server's own
`send` frames it; anything else (another server, a wrapped `send`, a HEAD request) gets no
direct writer, and a write the server would make wait is refused (the back-pressure of a
client that reads slowly is tested on a real server in tests/generate/test_backpressure.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import orjson
import pytest
import uvicorn

from evacore.channels.event_stream import (
    TextFrame,
    direct_body_writer,
    direct_text_writer,
    head_writer,
)
from tests.helpers import free_port

CHUNKS = [f"data: token {i}\n\n".encode() for i in range(200)]


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    if scope["path"] == "/texts":
        await _texts(send)
        return
    if scope["path"] == "/head":
        await _head(send)
        return
    if scope["path"] == "/wrapped":
        inner = send

        async def send(message: dict[str, Any]) -> None:  # a middleware's wrapper
            await inner(message)
    direct = direct_body_writer(send)
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/event-stream"),
                            (b"x-direct", b"yes" if direct else b"no")]})
    for chunk in CHUNKS:
        if direct is None or not direct(chunk):
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})
    if direct is not None:
        assert not direct(b"late")  # the response is complete: nothing more goes out


class _CountedWrites:
    """A connection's transport that keeps what each of its writes carried."""

    def __init__(self, transport: Any) -> None:
        self.transport, self.writes = transport, []

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))
        self.transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)


async def _head(send: Any) -> None:
    """The head and the first chunk through `head_writer`, the rest the ordinary way; the
    writes the connection saw are told in a last chunk."""
    cycle = send.__self__
    counted = cycle.transport = _CountedWrites(cycle.transport)
    write = head_writer(send)
    assert write is not None
    head = {"type": "http.response.start", "status": 200,
            "headers": [(b"content-type", b"text/event-stream")]}
    assert await write(head, CHUNKS[0])
    assert not await write(head, CHUNKS[1])  # a response already started takes no head
    await send({"type": "http.response.body", "body": CHUNKS[1], "more_body": True})
    told = orjson.dumps([w.decode() for w in counted.writes])
    await send({"type": "http.response.body", "body": told, "more_body": False})


TEXTS = ["plain", 'a "quote"', "line\nbreak", "üñí ✓ 🙂", "back\\slash"]


async def _texts(send: Any) -> None:
    """Each text written by `direct_text_writer` in the channel's frame (its JSON between
    the frame's ends) and added to the frame's list of sent texts; a frame that cannot
    frame a text alone (no start) leaves it unwritten and unsent."""
    sent: list[str] = []
    frame = TextFrame(b"data: ", b"\n\n", sent)
    watcher: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    write = direct_text_writer(send, frame, watcher)
    assert write is not None
    assert not write("before the head")  # nothing is written before the response starts
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/event-stream")]})
    for text in TEXTS:
        assert write(text)
    assert not write("")  # an empty text is no delta
    closed = TextFrame(None, b"\n\n", sent)  # a channel that cannot frame a text alone yet
    assert (refusing := direct_text_writer(send, closed, watcher)) and not refusing("refused")
    long = "x" * 3000  # a frame past the chunk heads looked up
    assert write(long)
    watcher.set_result(None)  # the client went away (as the stream's watcher sees it)
    assert not write("after the client left")
    assert sent == [*TEXTS, long]
    await send({"type": "http.response.body", "body": b"", "more_body": False})


@pytest.fixture
async def base_url() -> Any:
    server = uvicorn.Server(uvicorn.Config(_app, host="127.0.0.1", port=free_port(),
                                           http="httptools", log_level="warning",
                                           lifespan="off"))
    task = asyncio.create_task(server.serve())
    for _ in range(500):
        if server.started:
            break
        await asyncio.sleep(0.01)
    assert server.started
    yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    server.should_exit = True
    await task


async def test_chunks_written_directly_arrive_whole_and_in_order(base_url: str) -> None:
    async with httpx.AsyncClient(base_url=base_url) as client:
        for _ in range(3):  # the connection is kept and reused after each response
            async with client.stream("POST", "/", content=b"{}") as r:
                body = b"".join([part async for part in r.aiter_raw()])
            assert r.headers["x-direct"] == "yes"
            assert r.headers["transfer-encoding"] == "chunked"
            assert body == b"".join(CHUNKS)


async def test_a_wrapped_send_or_a_head_request_gets_no_direct_writer(base_url: str) -> None:
    async with httpx.AsyncClient(base_url=base_url) as client:
        r = await client.post("/wrapped", content=b"{}")
        assert r.headers["x-direct"] == "no" and r.content == b"".join(CHUNKS)
        r = await client.head("/")
        assert r.headers["x-direct"] == "no" and r.content == b""


def test_a_send_of_another_server_gets_no_direct_writer() -> None:
    async def send(message: dict[str, Any]) -> None:
        pass

    assert direct_body_writer(send) is None
    assert direct_body_writer(print) is None
    assert head_writer(send) is None


async def test_the_head_and_the_first_chunk_go_out_in_one_write(base_url: str) -> None:
    async with httpx.AsyncClient(base_url=base_url) as client:
        for _ in range(2):  # and the connection stays usable for the next request
            r = await client.post("/head", content=b"{}")
            assert r.status_code == 200
            assert r.headers["content-type"] == "text/event-stream"
            assert r.headers["transfer-encoding"] == "chunked"
            first, second = CHUNKS[0], CHUNKS[1]
            assert r.content.startswith(first + second)
            writes = orjson.loads(r.content[len(first + second):])
            assert len(writes) == 2  # the head with the first chunk, then the second
            assert writes[0].startswith("HTTP/1.1 200 OK\r\n")
            assert writes[0].endswith(f"\r\n\r\n{len(first):x}\r\n{first.decode()}\r\n")
            assert writes[1] == f"{len(second):x}\r\n{second.decode()}\r\n"


async def test_texts_written_directly_are_framed_by_the_channel_in_order(base_url: str) -> None:
    async with httpx.AsyncClient(base_url=base_url) as client:
        r = await client.post("/texts", content=b"{}")
    assert r.status_code == 200
    texts = [*TEXTS, "x" * 3000]
    assert r.content == b"".join(b"data: " + orjson.dumps(t) + b"\n\n" for t in texts)
    assert [orjson.loads(line[6:]) for line in r.text.split("\n\n")[:-1]] == texts
