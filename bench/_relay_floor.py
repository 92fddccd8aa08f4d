"""The floor of relaying a token in Python on this machine: a bare relay that passes the
fake upstream's bytes to the load client as they arrive (one read, one write per network
chunk), on raw asyncio protocols (uvloop when installed), with no parsing at all.

Its CPU per paced token is what the interpreter, the event loop and the kernel charge for
the two socket operations and two wake-ups every relayed token needs; whatever a real relay
spends beyond it is its own code. Must not: parse, buffer or change what passes; loopback
only.

    python bench/_relay_floor.py --port 8802 --upstream 8801
"""

from __future__ import annotations

import argparse
import asyncio

from fake_upstream import take_requests

REQUEST = (b'{"model":"floor","stream":true,"stream_options":{"include_usage":true},'
           b'"messages":[{"role":"user","content":"Hello"}]}')


class _Upstream(asyncio.Protocol):
    def __init__(self, client: asyncio.Transport) -> None:
        self.client = client

    def data_received(self, data: bytes) -> None:
        self.client.write(data)

    def connection_lost(self, exc: BaseException | None) -> None:
        self.client.close()


class _Client(asyncio.Protocol):
    """Each request head from the load client sends one canned request upstream."""

    def __init__(self, upstream_port: int) -> None:
        self.port = upstream_port
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
                lambda: _Upstream(self.transport), "127.0.0.1", self.port)  # type: ignore[arg-type]
        self.upstream.write(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (len(REQUEST), REQUEST))

    def connection_lost(self, exc: BaseException | None) -> None:
        if self.upstream is not None:
            self.upstream.close()


async def _main(port: int, upstream: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Client(upstream), "127.0.0.1", port)
    print(f"relay floor listening on http://127.0.0.1:{port}", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", type=int, required=True)
    args = parser.parse_args()
    try:
        import uvloop
    except ImportError:
        asyncio.run(_main(args.port, args.upstream))
    else:
        uvloop.run(_main(args.port, args.upstream))


if __name__ == "__main__":
    main()
