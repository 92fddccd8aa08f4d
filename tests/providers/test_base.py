"""The provider-facing shapes: Connection, collect(), make_provider (R2.10, R12.2)."""

from __future__ import annotations

import pytest

from evacore import providers
from evacore.errors import InvalidInput
from evacore.providers import (
    Answer,
    Connection,
    Finish,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    Usage,
    collect,
    make_provider,
)


def test_r12_2_connection_repr_masks_the_api_key() -> None:
    conn = Connection(id="c", name="OpenRouter", kind="openai-chat", api_key="sk-or-v1-secret")
    assert "sk-or-v1-secret" not in repr(conn)
    assert "api_key='***'" in repr(conn)
    assert "api_key=None" in repr(Connection(id="c", name="x", kind="mock"))


def test_r2_10_unknown_kind_is_invalid_input() -> None:
    with pytest.raises(InvalidInput, match="openai-chat"):
        make_provider(Connection(id="c", name="x", kind="gemini"))


@pytest.mark.parametrize("kind", providers.CONNECTION_KINDS)
async def test_r2_10_every_kind_has_an_adapter(kind: str) -> None:
    provider = make_provider(Connection(id="c", name="x", kind=kind,
                                        base_url="http://127.0.0.1:9"), client=None)
    assert isinstance(provider, providers.Provider)
    await provider.aclose()


async def test_r2_10_collect_folds_events_into_an_answer() -> None:
    async def events():  # type: ignore[no-untyped-def]
        for event in (ReasoningDelta("hm"), TextDelta("Hel"), TextDelta("lo"),
                      ToolCall("c1", "shell", '{"command":"ls"}'),
                      Finish("tool_calls", Usage(3, 4, 7), "m")):
            yield event

    assert await collect(events()) == Answer(
        text="Hello", tool_calls=[ToolCall("c1", "shell", '{"command":"ls"}')],
        finish_reason="tool_calls", usage=Usage(3, 4, 7), model="m", reasoning="hm")


def test_public_names_import() -> None:
    for name in providers.__all__:
        assert getattr(providers, name) is not None
