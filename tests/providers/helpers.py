"""Small helpers shared by the adapter tests."""

from __future__ import annotations

from typing import Any

from evacore.providers import Finish, ProviderEvent, ProviderRequest, TextDelta, ToolCall
from evacore.providers.base import Provider

CHAT = [{"role": "system", "content": "You are Eva."}, {"role": "user", "content": "Hello!"}]


def chat_request(**fields: Any) -> ProviderRequest:
    fields.setdefault("messages", [dict(m) for m in CHAT])
    return ProviderRequest(**fields)


def text_request(**fields: Any) -> ProviderRequest:
    fields.setdefault("prompt", "<|user|>Hello!<|assistant|>")
    return ProviderRequest(**fields)


async def events_of(provider: Provider, request: ProviderRequest) -> list[ProviderEvent]:
    return [event async for event in provider.stream(request)]


def text_of(events: list[ProviderEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def deltas(events: list[ProviderEvent]) -> list[str]:
    return [e.text for e in events if isinstance(e, TextDelta)]


def calls(events: list[ProviderEvent]) -> list[ToolCall]:
    return [e for e in events if isinstance(e, ToolCall)]


def finish(events: list[ProviderEvent]) -> Finish:
    assert isinstance(events[-1], Finish), events
    return events[-1]
