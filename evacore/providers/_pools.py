"""An httpx transport that spreads requests over several connection pools.

httpcore's pool walks all of its connections (and polls the idle ones' sockets) every time
a request starts or ends, so one pool serving many concurrent streams costs more per
request the more streams there are: at 64 concurrent streams that walk was about 1.5 ms of
CPU per request here. Several smaller pools keep each walk short. A request goes to the
pool with the fewest requests in flight, the first one on a tie, so a quiet instance keeps
using one pool and its warm keep-alive connections.

Must not: change requests or responses; it only picks which pool sends them.
"""

from __future__ import annotations

from typing import Any

import httpx

POOLS = 16


class _Counted(httpx.AsyncByteStream):
    """A response body that tells its pool's counter when it is closed."""

    def __init__(self, stream: httpx.AsyncByteStream, done: Any) -> None:
        self._stream, self._done = stream, done

    async def __aiter__(self) -> Any:
        async for chunk in self._stream:
            yield chunk

    async def aclose(self) -> None:
        try:
            await self._stream.aclose()
        finally:
            self._done()


class SpreadTransport(httpx.AsyncBaseTransport):
    def __init__(self, pools: int = POOLS, *, limits: httpx.Limits | None = None,
                 **kwargs: Any) -> None:
        limits = limits or httpx.Limits()
        each = httpx.Limits(
            max_connections=_share(limits.max_connections, pools),
            max_keepalive_connections=_share(limits.max_keepalive_connections, pools),
            keepalive_expiry=limits.keepalive_expiry,
        )
        # one TLS context for all (each would otherwise load the CA bundle again)
        kwargs["verify"] = httpx.create_ssl_context(
            verify=kwargs.get("verify", True), cert=kwargs.pop("cert", None),
            trust_env=kwargs.get("trust_env", True))
        self._transports = [httpx.AsyncHTTPTransport(limits=each, **kwargs)
                            for _ in range(max(1, pools))]
        self.in_flight = [0] * len(self._transports)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        i = min(range(len(self.in_flight)), key=self.in_flight.__getitem__)
        self.in_flight[i] += 1
        closed = False

        def done() -> None:
            nonlocal closed
            if not closed:
                closed = True
                self.in_flight[i] -= 1

        try:
            response = await self._transports[i].handle_async_request(request)
        except BaseException:
            done()
            raise
        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = _Counted(response.stream, done)
        return response

    async def aclose(self) -> None:
        for transport in self._transports:
            await transport.aclose()


def _share(total: int | None, parts: int) -> int | None:
    return None if total is None else max(1, -(-total // max(1, parts)))
