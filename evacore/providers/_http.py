"""The shared skeleton of the HTTP adapters: wire request, streaming with retries and
deadlines, non-stream answers, client-side stop strings, client ownership.

Must not: contain any vendor's body or event format (subclasses supply those).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import ClassVar

import httpx

from evacore.errors import ProviderProtocolError
from evacore.providers._fast_lane import FastLane, FastText
from evacore.providers._sending import make_http_client, open_stream, read_body
from evacore.providers._sse import SSEEvent, parse_json_object
from evacore.providers._stop import apply_stop, cut_answer
from evacore.providers._stream_client import StreamClient
from evacore.providers._transport import Deadlines, drain, retrying, sse_events
from evacore.providers.base import (
    Answer,
    Connection,
    Finish,
    ProviderEvent,
    ProviderRequest,
    TextTap,
    WireRequest,
)
from evacore.redact import redact_headers, redact_url


class HTTPProvider:
    """Base of openai-chat, openai-text, anthropic and kobold."""

    kind: ClassVar[str]

    def __init__(self, connection: Connection, *, client: httpx.AsyncClient | None = None,
                 streams: StreamClient | None = None) -> None:
        self.connection = connection
        self._client = client or make_http_client()
        self._owns_client = client is None
        self._streams = streams or StreamClient()
        self._owns_streams = streams is None

    # --- what each adapter supplies -------------------------------------------------------
    def build_body(self, request: ProviderRequest, *, stream: bool) -> dict[str, object]:
        raise NotImplementedError

    def endpoint(self, *, stream: bool) -> str:
        raise NotImplementedError

    def headers(self, request: ProviderRequest, *, stream: bool) -> dict[str, str]:
        raise NotImplementedError

    def parse_stream(
        self, events: AsyncIterator[SSEEvent], request: ProviderRequest
    ) -> AsyncIterator[ProviderEvent]:
        raise NotImplementedError

    fast_text: ClassVar[FastText | None] = None
    """An adapter with a fast lane (`_fast_lane.py`) sets this to its parse of one event's
    data into a plain text delta; its `parse_stream` then also takes the lane (and tells
    it the model name it saw)."""

    def parse_answer(self, body: dict[str, object], request: ProviderRequest) -> Answer:
        raise NotImplementedError

    # --- the Provider protocol -----------------------------------------------------------
    def wire_request(self, request: ProviderRequest, *, stream: bool = True) -> WireRequest:
        return WireRequest(
            method="POST",
            url=redact_url(self.endpoint(stream=stream)),
            headers=redact_headers(self.headers(request, stream=stream)),
            body=self.build_body(request, stream=stream),
        )

    def stream(self, request: ProviderRequest, *, wire: WireRequest | None = None,
               tap: TextTap | None = None) -> AsyncIterator[ProviderEvent]:
        """The answer's events (nothing is sent before the first is asked for); no layer of
        its own between the caller and the upstream's events. `tap`: the consumer's offer
        to take plain text deltas from the network read itself, honoured by adapters with
        a `fast_text` and only without stop strings (which hold text back)."""
        wire = wire or self.wire_request(request, stream=True)
        if tap is not None and (request.stop or self.fast_text is None):
            tap = None
        events = self.upstream_events(wire, request, tap) if tap else self.upstream_events(
            wire, request)
        if request.stop:
            events = apply_stop(events, request.stop)
        return events

    def upstream_events(
        self, wire: WireRequest, request: ProviderRequest, tap: TextTap | None = None
    ) -> AsyncIterator[ProviderEvent]:
        dl = Deadlines(self.connection.timeouts)
        return retrying(self.connection, dl,
                        lambda: self._stream_attempt(wire, request, dl, tap))

    async def _stream_attempt(
        self, wire: WireRequest, request: ProviderRequest, dl: Deadlines,
        tap: TextTap | None = None,
    ) -> AsyncIterator[ProviderEvent]:
        conn = self.connection
        headers = self.headers(request, stream=True)
        # `stream` passes a tap only to an adapter with a `fast_text`
        lane = FastLane(tap, self.fast_text, dl) if tap and self.fast_text else None
        # its body tap, from the chunks that come with the head on: a first token that
        # comes with the head goes out without waiting for this task to wake
        take = lane.reader() if lane is not None else None
        async with (
            open_stream(self._streams, wire, headers, dl, conn, self.endpoint(stream=True),
                        take) as response,
            aclosing(sse_events(response, dl, conn, lane, take)) as sse,
            aclosing(self.parse_stream(sse, request, lane) if lane is not None
                     else self.parse_stream(sse, request)) as events,
        ):
            async for event in events:
                if isinstance(event, Finish):
                    if lane is not None:
                        lane.close()
                    await drain(sse)
                yield event

    async def complete(self, request: ProviderRequest) -> Answer:
        return await self.complete_wire(self.wire_request(request, stream=False), request)

    async def complete_wire(self, wire: WireRequest, request: ProviderRequest) -> Answer:
        dl = Deadlines(self.connection.timeouts, streaming=False)
        headers = self.headers(request, stream=False)

        async def attempt() -> AsyncIterator[Answer]:
            async with open_stream(self._streams, wire, headers, dl,
                                   self.connection, self.endpoint(stream=False)) as resp:
                raw = await read_body(resp, dl, self.connection)
            yield self.parse_answer(parse_json_object(raw, "answer"), request)

        async with aclosing(retrying(self.connection, dl, attempt)) as answers:
            async for answer in answers:
                return cut_answer(answer, request.stop)
        raise ProviderProtocolError(f"{self.kind}: no answer")

    async def count_tokens(self, text: str) -> int | None:
        return None

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()
        if self._owns_streams:
            await self._streams.aclose()
