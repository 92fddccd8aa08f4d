"""The floor of relaying a token in Python on this machine: a bare relay that passes the
fake upstream's bytes to the load client as they arrive (one read, one write per network
chunk), on raw asyncio protocols (uvloop when installed), with no parsing at all.

Its CPU per paced token is what the interpreter, the event loop and the kernel charge for
the two socket operations and two wake-ups every relayed token needs; whatever a real relay
spends beyond it is its own code. Must not: parse, buffer or change what passes; loopback
only.

With `--parse` it is instead the least a relay keeping evacore's stream contract does: the
upstream's HTTP response parsed (httptools), each of its SSE events' JSON parsed (orjson),
each text delta written to the client as evacore's `delta` event in its own HTTP chunk, and
a `done` event at the end. No storage, no checks, no tour: a straightforward relay's whole
per-token work, in the same interpreter and event loop.

    python bench/_relay_floor.py --port 8802 --upstream 8801 [--parse]
"""

from __future__ import annotations

import argparse
import asyncio

from fake_upstream import take_requests

_HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
         b"transfer-encoding: chunked\r\n\r\n")
_DONE = b"event: done\ndata: {}\n\n"

REQUEST = (b'{"model":"floor","stream":true,"stream_options":{"include_usage":true},'
           b'"messages":[{"role":"user","content":"Hello"}]}')


class _Upstream(asyncio.Protocol):
    def __init__(self, client: asyncio.Transport) -> None:
        self.client = client

    def data_received(self, data: bytes) -> None:
        self.client.write(data)

    def connection_lost(self, exc: BaseException | None) -> None:
        self.client.close()


class _Parsing(asyncio.Protocol):
    """`--parse`: the upstream's SSE read event by event and written on as `delta` events."""

    def __init__(self, client: asyncio.Transport) -> None:
        import httptools
        import orjson

        self.client = client
        self.parser = httptools.HttpResponseParser(self)
        self.loads, self.dumps = orjson.loads, orjson.dumps
        self.rest = b""

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_headers_complete(self) -> None:
        self.client.write(_HEAD)

    def on_body(self, body: bytes) -> None:
        *events, self.rest = (self.rest + body if self.rest else body).split(b"\n\n")
        out = []
        for event in events:
            if not event.startswith(b"data: ") or event == b"data: [DONE]":
                continue
            choices = self.loads(event[6:]).get("choices")
            text = choices[0].get("delta", {}).get("content") if choices else None
            if text:
                frame = b"event: delta\ndata: " + self.dumps({"text": text}) + b"\n\n"
                out.append(b"%x\r\n%s\r\n" % (len(frame), frame))
        if out:
            self.client.write(b"".join(out))

    def on_message_complete(self) -> None:
        self.client.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(_DONE), _DONE))

    def connection_lost(self, exc: BaseException | None) -> None:
        self.client.close()


class _Client(asyncio.Protocol):
    """Each request head from the load client sends one canned request upstream."""

    def __init__(self, upstream_port: int, parse: bool = False) -> None:
        self.port = upstream_port
        self.relay = _Parsing if parse else _Upstream
        self.upstream: asyncio.Transport | None = None
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        for _ in take_requests(self.buf):
            asyncio.get_running_loop().create_task(self._forward())

    async def _forward(self) -> None:
        if self.upstream is None or self.upstream.is_closing():
            assert self.transport is not None
            self.upstream, _ = await asyncio.get_running_loop().create_connection(
                lambda: self.relay(self.transport), "127.0.0.1", self.port)  # type: ignore[arg-type]
        self.upstream.write(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (len(REQUEST), REQUEST))

    def connection_lost(self, exc: BaseException | None) -> None:
        if self.upstream is not None:
            self.upstream.close()


async def _main(port: int, upstream: int, parse: bool) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Client(upstream, parse), "127.0.0.1", port)
    print(f"relay floor listening on http://127.0.0.1:{port}", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", type=int, required=True)
    parser.add_argument("--parse", action="store_true",
                        help="parse the upstream's events and write evacore's delta events")
    args = parser.parse_args()
    try:
        import uvloop
    except ImportError:
        asyncio.run(_main(args.port, args.upstream, args.parse))
    else:
        uvloop.run(_main(args.port, args.upstream, args.parse))


if __name__ == "__main__":
    main()
