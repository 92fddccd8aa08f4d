"""What the two OpenAI-compatible adapters share: endpoint, headers, stream parsing, the
first choice of a whole answer, and llama.cpp's tokenize endpoint.

Must not: build request bodies or read a choice's content (each adapter does its own).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from evacore.errors import ProviderProtocolError
from evacore.providers._fast_lane import FastLane
from evacore.providers._http import HTTPProvider
from evacore.providers._openai_wire import (
    fast_chat_text,
    openai_headers,
    openai_url,
    parse_openai_stream,
    server_url,
)
from evacore.providers._sse import SSEEvent
from evacore.providers._tokenize import llamacpp_tokenize
from evacore.providers._transport import label
from evacore.providers.base import (
    Connection,
    ProviderEvent,
    ProviderRequest,
    effective_params,
)


class OpenAICompatibleProvider(HTTPProvider):
    path = ""
    """The endpoint below the `/v1` base, e.g. `/chat/completions`."""
    chat = True
    """Whether streamed chunks carry `delta` (chat) or `text` (completions)."""
    fast_text = staticmethod(fast_chat_text)

    def __init__(self, connection: Connection, **kwargs: Any) -> None:
        super().__init__(connection, **kwargs)
        self._tokenize_missing = False

    def endpoint(self, *, stream: bool) -> str:
        return openai_url(self.connection.base_url, self.path)

    def headers(self, request: ProviderRequest, *, stream: bool) -> dict[str, str]:
        return openai_headers(
            self.connection, effective_params(self.connection, request), stream=stream
        )

    def parse_stream(
        self, events: AsyncIterator[SSEEvent], request: ProviderRequest,
        lane: FastLane | None = None,
    ) -> AsyncIterator[ProviderEvent]:
        return parse_openai_stream(events, self.connection, chat=self.chat, lane=lane)

    def first_choice(self, body: dict[str, Any]) -> dict[str, Any]:
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise ProviderProtocolError(f"{label(self.connection)}: the answer has no choices")
        return choices[0]

    async def count_tokens(self, text: str) -> int | None:
        """llama.cpp's `POST /tokenize`; None where the server has no such endpoint."""
        if self._tokenize_missing:
            return None
        count, missing = await llamacpp_tokenize(
            self._client, server_url(self.connection.base_url, "/tokenize"), self.connection, text
        )
        self._tokenize_missing = missing
        return count
