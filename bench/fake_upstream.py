"""A fast fake OpenAI-compatible streaming upstream for the relay benchmark: a raw asyncio
protocol (on uvloop when installed) that writes pre-built SSE chunks, so the fake is never
the bottleneck being measured.

Must not: bind anything but loopback, or parse more of HTTP than a benchmark client sends.

    python bench/fake_upstream.py --port 8801 --tokens 200 --delay-ms 0
    with FastFakeUpstream(tokens=200) as upstream: ...upstream.base_url...
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
from dataclasses import dataclass, field
from typing import Any, Self

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})


def _event_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _sse(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


@dataclass
class Prebuilt:
    """Every byte the fake ever writes, built once."""

    tokens: int
    head: bytes = b""
    deltas: dict[bytes, list[bytes]] = field(default_factory=dict)  # path -> chunks
    tails: dict[tuple[bytes, bool], bytes] = field(default_factory=dict)  # (path, usage)
    whole: dict[bytes, bytes] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.head = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     b"Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n")
        usage = {"prompt_tokens": 10, "completion_tokens": self.tokens,
                 "total_tokens": 10 + self.tokens}
        base = {"id": "bench", "created": 0, "model": "bench-model"}
        chat = {**base, "object": "chat.completion.chunk"}
        text = {**base, "object": "text_completion"}
        for path, obj, piece in ((b"/v1/chat/completions", chat, "delta"),
                                 (b"/v1/completions", text, "text")):
            def choice(token: str | None, finish: str | None, piece: str = piece) -> dict:
                if piece == "delta":
                    return {"index": 0, "delta": {} if token is None else {"content": token},
                            "finish_reason": finish}
                return {"index": 0, "text": token or "", "finish_reason": finish}

            self.deltas[path] = [_chunk(_sse({**obj, "choices": [choice(" tok", None)]}))
                                 for _ in range(self.tokens)]
            end = _chunk(_sse({**obj, "choices": [choice(None, "stop")]}))
            done = _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"
            with_usage = _chunk(_sse({**obj, "choices": [], "usage": usage}))
            self.tails[(path, False)] = end + done
            self.tails[(path, True)] = end + with_usage + done
            content = " tok" * self.tokens
            answer = ({"index": 0, "message": {"role": "assistant", "content": content},
                       "finish_reason": "stop"} if piece == "delta"
                      else {"index": 0, "text": content, "finish_reason": "stop"})
            body = json.dumps({**base, "choices": [answer], "usage": usage}).encode()
            self.whole[path] = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                b"Content-Length: %d\r\n\r\n%s" % (len(body), body))


def take_requests(buf: bytearray) -> list[tuple[bytes, bytes]]:
    """The whole requests at the front of `buf` as (lower-cased head, body), taken out of it;
    a request still arriving stays."""
    out = []
    while (end := buf.find(b"\r\n\r\n")) >= 0:
        head = bytes(buf[:end]).lower()
        length = 0
        if (at := head.find(b"content-length:")) >= 0:
            length = int(head[at + 15:].split(b"\r\n", 1)[0])
        if len(buf) < end + 4 + length:
            break
        out.append((head, bytes(buf[end + 4: end + 4 + length])))
        del buf[: end + 4 + length]
    return out


_NOT_FOUND = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"


class _Protocol(asyncio.Protocol):
    def __init__(self, built: Prebuilt, delay: float, first: float) -> None:
        self.built, self.delay, self.first = built, delay, first
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        for head, body in take_requests(self.buf):
            self._answer(head.split(b" ", 2)[1].split(b"?")[0], body)

    def _answer(self, path: bytes, body: bytes) -> None:
        assert self.transport is not None
        compact = body.replace(b" ", b"")
        if path not in self.built.deltas:
            self.transport.write(_NOT_FOUND)
        elif b'"stream":true' not in compact:
            self.transport.write(self.built.whole[path])
        elif self.delay == 0 and self.first == 0:
            self.transport.write(b"".join([self.built.head, *self.built.deltas[path],
                                           self.built.tails[(path, b"include_usage" in body)]]))
        else:
            asyncio.get_running_loop().create_task(
                self._paced(path, b'"include_usage":true' in compact))

    async def _paced(self, path: bytes, usage: bool) -> None:
        transport = self.transport
        assert transport is not None
        transport.write(self.built.head)
        await asyncio.sleep(self.first)
        for i, chunk in enumerate(self.built.deltas[path]):
            if transport.is_closing():
                return
            if i and self.delay:
                await asyncio.sleep(self.delay)
            transport.write(chunk)
        if not transport.is_closing():
            transport.write(self.built.tails[(path, usage)])


async def serve(host: str, port: int, tokens: int, delay_ms: float,
                first_token_ms: float = 0) -> asyncio.AbstractServer:
    if host not in LOOPBACK_HOSTS:
        raise ValueError(f"the fake upstream binds loopback only, not {host!r}")
    built = Prebuilt(tokens)
    loop = asyncio.get_running_loop()
    return await loop.create_server(
        lambda: _Protocol(built, delay_ms / 1000, first_token_ms / 1000), host, port,
        backlog=1024)


class FastFakeUpstream:
    """Runs the fake in a background thread; `base_url` ends in `/v1`."""

    def __init__(self, *, tokens: int = 200, delay_ms: float = 0, first_token_ms: float = 0,
                 host: str = "127.0.0.1", port: int = 0) -> None:
        self.tokens, self.delay_ms, self.first_token_ms = tokens, delay_ms, first_token_ms
        self.host, self.port = host, port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def _run(self) -> None:
        loop = _event_loop()
        self._loop = loop
        try:
            server = loop.run_until_complete(
                serve(self.host, self.port, self.tokens, self.delay_ms, self.first_token_ms))
        except BaseException as exc:  # noqa: BLE001 - reported to the starting thread
            self._error = exc
            self._ready.set()
            return
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            server.close()
            loop.run_until_complete(server.wait_closed())
            loop.close()

    def __enter__(self) -> Self:
        self._thread = threading.Thread(target=self._run, name="fast-fake-upstream", daemon=True)
        self._thread.start()
        self._ready.wait(5)
        if self._error is not None:
            raise self._error
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--delay-ms", type=float, default=0)
    parser.add_argument("--first-token-ms", type=float, default=0)
    args = parser.parse_args()
    loop = _event_loop()
    asyncio.set_event_loop(loop)
    server = loop.run_until_complete(
        serve(args.host, args.port, args.tokens, args.delay_ms, args.first_token_ms))
    port = server.sockets[0].getsockname()[1]
    print(f"fake upstream listening on http://{args.host}:{port}/v1", flush=True)
    try:
        loop.run_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()


if __name__ == "__main__":
    main()
