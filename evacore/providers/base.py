"""Provider-facing shapes (Connection, ProviderRequest, events, Answer) and the Provider protocol.

Must not: speak HTTP or know any vendor's wire format; adapters own that (stages 10-11).
"""

from __future__ import annotations

import importlib
import math
from collections.abc import AsyncIterable, AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from evacore.errors import InvalidInput
from evacore.redact import connection_secrets, redact_url, remember

if TYPE_CHECKING:
    import httpx

    from evacore.providers._stream_client import StreamClient

CONNECTION_KINDS = ("openai-chat", "openai-text", "anthropic", "kobold", "mock")

_ADAPTERS = {
    "openai-chat": ("evacore.providers.openai_chat", "OpenAIChatProvider"),
    "openai-text": ("evacore.providers.openai_text", "OpenAITextProvider"),
    "anthropic": ("evacore.providers.anthropic", "AnthropicProvider"),
    "kobold": ("evacore.providers.kobold", "KoboldProvider"),
    "mock": ("evacore.providers.mock", "MockProvider"),
}


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Seconds. `first_token` runs from sending to the first text/tool event; `idle` between
    chunks after it; `total` bounds the whole request including retries."""

    connect: float = 10.0
    first_token: float = 60.0
    idle: float = 60.0
    total: float = 600.0


@dataclass(frozen=True, repr=False)
class Connection:
    """One configured backend (R2.10, R12.2) as the adapters see it."""

    id: str
    name: str
    kind: str
    base_url: str = ""
    api_key: str | None = None
    model: str = ""
    context_size: int = 8192
    max_tokens: int = 512
    vision: bool = False
    prefill: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    timeouts: Timeouts = field(default_factory=Timeouts)
    retries: int = 2
    retry_backoff: float = 0.5
    retry_after_cap: float = 20.0

    def __post_init__(self) -> None:
        # from now on the redactor removes this connection's secrets from every error,
        # diagnostic and log line
        remember(connection_secrets(self.api_key, self.base_url, self.params))

    def __repr__(self) -> str:
        key = None if self.api_key is None else "***"
        return (
            f"Connection(id={self.id!r}, name={self.name!r}, kind={self.kind!r}, "
            f"base_url={redact_url(self.base_url)!r}, api_key={key!r}, model={self.model!r}, "
            f"context_size={self.context_size}, max_tokens={self.max_tokens}, "
            f"vision={self.vision}, prefill={self.prefill!r}, retries={self.retries})"
        )


@dataclass(slots=True)
class ProviderRequest:
    """What a step sends: chat adapters read `messages`, text adapters read `prompt`.

    `prefill` is the resolved assistant prefill (chat adapters only; text callers have
    already appended it to `prompt`). `params` override the connection's params key by key;
    `max_tokens` / `model` fall back to the connection's when empty.
    """

    messages: list[dict[str, Any]] | None = None
    prompt: str | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    max_tokens: int | None = None
    stop: list[str] = field(default_factory=list)
    prefill: str = ""
    model: str = ""
    char_name: str = ""
    """The character's and the user's names, for adapters that write speaker names into
    the text (Anthropic, as SillyTavern's conversion does)."""
    user_name: str = ""


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A complete tool call; `arguments` is the raw string exactly as the model produced it."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


@dataclass(frozen=True, slots=True)
class Finish:
    """Always the last event of a stream. finish_reason: stop | length | tool_calls |
    content_filter | abort | ... (normalised across adapters)."""

    finish_reason: str
    usage: Usage | None = None
    model: str | None = None


ProviderEvent = TextDelta | ReasoningDelta | ToolCall | Finish


@dataclass(slots=True)
class Answer:
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str = "stop"
    usage: Usage | None = None
    model: str | None = None
    reasoning: str = ""


@dataclass(frozen=True, slots=True)
class WireRequest:
    """The exact request an adapter sends, with the secrets in `url` and `headers` masked
    (diagnostics); the adapter sends the real ones."""

    method: str
    url: str
    headers: dict[str, str]
    body: dict[str, Any]


class TextTap:
    """A stream consumer's offer to take plain text deltas in the network read's own
    callback, before any task wakes up (the fast lane of a relayed answer).

    `take(texts)` is set by the consumer while it can pass texts on at once (and None
    otherwise); it returns False to refuse them, and the texts then come as `TextDelta`
    events in order, as they would have without the tap. An adapter that has a fast lane
    calls it only for texts that would have been plain `TextDelta`s, only while the
    consumer waits for its next event and nothing is left unread before them.
    `take_text(text)`, set with it, is the same for one text (the usual network read of a
    model streaming at its pace), with no list made for it.
    """

    __slots__ = ("take", "take_text")

    def __init__(self) -> None:
        self.take: Callable[[list[str]], bool] | None = None
        self.take_text: Callable[[str], bool] | None = None


@runtime_checkable
class Provider(Protocol):
    connection: Connection

    def stream(self, request: ProviderRequest, *, wire: WireRequest | None = None
               ) -> AsyncIterator[ProviderEvent]:
        """The answer's events; `wire` is this request's `wire_request(…, stream=True)` when
        the caller built it already (an HTTP adapter sends it as it is)."""
        ...

    async def complete(self, request: ProviderRequest) -> Answer: ...

    async def count_tokens(self, text: str) -> int | None: ...

    def wire_request(self, request: ProviderRequest, *, stream: bool = True) -> WireRequest: ...

    async def aclose(self) -> None: ...


async def collect(events: AsyncIterable[ProviderEvent]) -> Answer:
    """Fold a stream of events into one Answer (text joined, tool calls in order)."""
    answer = Answer()
    text: list[str] = []
    reasoning: list[str] = []
    async for event in events:
        if isinstance(event, TextDelta):
            text.append(event.text)
        elif isinstance(event, ReasoningDelta):
            reasoning.append(event.text)
        elif isinstance(event, ToolCall):
            answer.tool_calls.append(event)
        elif isinstance(event, Finish):
            answer.finish_reason = event.finish_reason
            answer.usage = event.usage
            answer.model = event.model
    answer.text = "".join(text)
    answer.reasoning = "".join(reasoning)
    return answer


def effective_params(connection: Connection, request: ProviderRequest) -> dict[str, Any]:
    return {**connection.params, **request.params}


def effective_max_tokens(connection: Connection, request: ProviderRequest) -> int:
    return request.max_tokens or connection.max_tokens


def effective_model(connection: Connection, request: ProviderRequest) -> str:
    return request.model or connection.model


def with_params(body: dict[str, Any], params: dict[str, Any],
                allowed: frozenset[str] | set[str]) -> dict[str, Any]:
    """Add the allowed sampler params (in a stable order), then any `extra_body` verbatim."""
    for key in sorted(allowed & params.keys()):
        body[key] = params[key]
    extra = params.get("extra_body")
    if isinstance(extra, dict):
        body.update(extra)
    return body


def heuristic_tokens(text: str) -> int:
    """SillyTavern's estimate when no tokenizer is known: ceil(chars / 3.35)."""
    return math.ceil(len(text) / 3.35) if text else 0


def make_provider(connection: Connection, *, client: httpx.AsyncClient | None = None,
                  streams: StreamClient | None = None) -> Provider:
    """The adapter for `connection.kind`. A passed client (httpx for whole answers,
    `streams` for streamed ones) is shared and not closed by aclose()."""
    try:
        module_name, class_name = _ADAPTERS[connection.kind]
    except KeyError:
        raise InvalidInput(
            f"unknown connection kind {connection.kind!r}; expected one of "
            + ", ".join(CONNECTION_KINDS)
        ) from None
    adapter = getattr(importlib.import_module(module_name), class_name)
    provider: Provider = adapter(connection, client=client, streams=streams)
    return provider
