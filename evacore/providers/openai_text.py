"""The `openai-text` adapter: /v1/completions in text mode (vLLM, llama.cpp, TabbyAPI,
Aphrodite, OpenAI legacy models), streaming, stop strings.

Must not: touch the prompt; the instruct render (stage 9) already appended any prefill.
"""

from __future__ import annotations

from typing import Any

from evacore.errors import InvalidInput
from evacore.providers._openai_base import OpenAICompatibleProvider
from evacore.providers._openai_wire import (
    COMPAT_SAMPLERS,
    fast_completion_text,
    normalise_finish,
    usage_from,
)
from evacore.providers.base import (
    Answer,
    Connection,
    ProviderRequest,
    effective_max_tokens,
    effective_model,
    effective_params,
    with_params,
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
    return with_params(body, params, TEXT_PARAMS)


class OpenAITextProvider(OpenAICompatibleProvider):
    kind = "openai-text"
    path = "/completions"
    chat = False
    fast_text = staticmethod(fast_completion_text)

    def build_body(self, request: ProviderRequest, *, stream: bool) -> dict[str, Any]:
        return build_request_body(self.connection, request, stream=stream)

    def parse_answer(self, body: dict[str, Any], request: ProviderRequest) -> Answer:
        choice = self.first_choice(body)
        text = choice.get("text")
        return Answer(
            text=text if isinstance(text, str) else "",
            finish_reason=normalise_finish(choice.get("finish_reason"), False),
            usage=usage_from(body.get("usage")),
            model=body.get("model") if isinstance(body.get("model"), str) else None,
        )
