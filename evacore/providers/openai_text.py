"""The `openai-text` adapter: /v1/completions in text mode (vLLM, llama.cpp, TabbyAPI,
Aphrodite, OpenAI legacy models), streaming, stop strings.

Must not: touch the prompt; the instruct render (stage 9) already appended any prefill.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from evacore.errors import InvalidInput, ProviderProtocolError
from evacore.providers._http import HTTPProvider
from evacore.providers._openai_wire import (
    COMPAT_SAMPLERS,
    normalise_finish,
    openai_base,
    openai_headers,
    parse_openai_stream,
    server_root,
    usage_from,
)
from evacore.providers._sse import SSEEvent
from evacore.providers._tokenize import llamacpp_tokenize
from evacore.providers._transport import label
from evacore.providers.base import (
    Answer,
    Connection,
    ProviderEvent,
    ProviderRequest,
    effective_max_tokens,
    effective_model,
    effective_params,
)

TEXT_PARAMS = frozenset({
    "temperature", "top_p", "frequency_penalty", "presence_penalty", "seed", "logit_bias",
    "logprobs", "suffix", "user",
}) | COMPAT_SAMPLERS


def build_request_body(
    connection: Connection, request: ProviderRequest, *, stream: bool
) -> dict[str, Any]:
    """The exact JSON body sent to /completions (pure)."""
    if request.prompt is None:
        raise InvalidInput("openai-text needs a rendered prompt (text mode)")
    params = effective_params(connection, request)
    body: dict[str, Any] = {}
    model = effective_model(connection, request)
    if model:
        body["model"] = model
    body["prompt"] = request.prompt
    body["stream"] = stream
    if stream and params.get("stream_usage", True):
        body["stream_options"] = {"include_usage": True}
    body["max_tokens"] = effective_max_tokens(connection, request)
    if request.stop:
        body["stop"] = list(request.stop)
    for key in sorted(TEXT_PARAMS & params.keys()):
        body[key] = params[key]
    extra = params.get("extra_body")
    if isinstance(extra, dict):
        body.update(extra)
    return body


class OpenAITextProvider(HTTPProvider):
    kind = "openai-text"

    def __init__(self, connection: Connection, **kwargs: Any) -> None:
        super().__init__(connection, **kwargs)
        self._tokenize_missing = False

    def build_body(self, request: ProviderRequest, *, stream: bool) -> dict[str, Any]:
        return build_request_body(self.connection, request, stream=stream)

    def endpoint(self, *, stream: bool) -> str:
        return openai_base(self.connection.base_url) + "/completions"

    def headers(self, request: ProviderRequest, *, stream: bool) -> dict[str, str]:
        return openai_headers(
            self.connection, effective_params(self.connection, request), stream=stream
        )

    def parse_stream(
        self, events: AsyncIterator[SSEEvent], request: ProviderRequest
    ) -> AsyncIterator[ProviderEvent]:
        return parse_openai_stream(events, self.connection, chat=False)

    def parse_answer(self, body: dict[str, Any], request: ProviderRequest) -> Answer:
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise ProviderProtocolError(f"{label(self.connection)}: the answer has no choices")
        text = choices[0].get("text")
        return Answer(
            text=text if isinstance(text, str) else "",
            finish_reason=normalise_finish(choices[0].get("finish_reason"), False),
            usage=usage_from(body.get("usage")),
            model=body.get("model") if isinstance(body.get("model"), str) else None,
        )

    async def count_tokens(self, text: str) -> int | None:
        """llama.cpp's `POST /tokenize`; None where the server has no such endpoint."""
        if self._tokenize_missing:
            return None
        count, missing = await llamacpp_tokenize(
            self._client, server_root(self.connection.base_url), self.connection, text
        )
        self._tokenize_missing = missing
        return count
