"""The offline mock provider (R2.10): deterministic, scriptable, stateless."""

from __future__ import annotations

import time
from typing import Any

import pytest

from evacore.errors import (
    InvalidInput,
    ProviderConnectionError,
    ProviderHTTPError,
    ProviderTimeout,
)
from evacore.providers import (
    Connection,
    ProviderRequest,
    ReasoningDelta,
    TextDelta,
    Timeouts,
    ToolCall,
    make_provider,
)
from evacore.providers.base import Provider
from tests.providers.helpers import calls, deltas, events_of, finish, text_of

SCRIPT: list[dict[str, Any]] = [
    {"match": r"(?i)weather", "text": "Sunny, 24 degrees."},
    {"if_prompt_contains": "<system-interrupt", "text": "Corrected answer."},
    {"match": r"read", "step": 0, "text": "Reading it.",
     "tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}},
                    {"name": "list_dir", "arguments": {"path": "."}}]},
    {"match": r"read", "step": 1, "text": "The file says hello."},
    {"match": r"^fail$", "error": {"status": 503, "message": "mock overloaded"}},
    {"match": r"^cut$", "text": "one two three four", "fail_after": 2},
    {"match": r"^think$", "reasoning": "Let me think.", "text": "Done.",
     "finish_reason": "length"},
]


def mock(**params: Any) -> Provider:
    conn = Connection(id="m", name="demo", kind="mock", params={"script": SCRIPT, **params},
                      timeouts=Timeouts(first_token=0.3, idle=0.3))
    return make_provider(conn)


def said(text: str, *more: dict[str, Any]) -> ProviderRequest:
    return ProviderRequest(messages=[{"role": "system", "content": "You are Eva."},
                                     {"role": "user", "content": text}, *more])


async def test_r2_10_mock_echoes_word_by_word_without_script() -> None:
    provider = make_provider(Connection(id="m", name="m", kind="mock"))
    events = await events_of(provider, said("good   morning Eva"))
    assert deltas(events) == ["(mock) ", "You ", "said: ", "good ", "morning ", "Eva"]
    end = finish(events)
    assert end.finish_reason == "stop" and end.model == "mock"
    assert end.usage is not None and end.usage.completion_tokens > 0
    assert end.usage.total_tokens == end.usage.prompt_tokens + end.usage.completion_tokens
    again = await events_of(provider, said("good   morning Eva"))
    assert again == events  # deterministic


async def test_r2_10_mock_first_matching_rule_wins() -> None:
    provider = mock()
    assert text_of(await events_of(provider, said("What's the WEATHER like?"))) == (
        "Sunny, 24 degrees.")
    interrupted = said("What's up?", {"role": "assistant", "content": "x"},
                       {"role": "user", "content": "<system-interrupt rule=\"r\">no</system-interrupt>"})
    # the last user message decides `match`; if_prompt_contains looks anywhere
    assert text_of(await events_of(provider, interrupted)) == "Corrected answer."
    assert text_of(await events_of(provider, said("nothing matches"))).startswith("(mock)")


async def test_r2_10_mock_steps_of_a_tour_and_tool_call_ids() -> None:
    provider = mock()
    first = await events_of(provider, said("please read my notes"))
    assert text_of(first) == "Reading it."
    assert calls(first) == [ToolCall("call_0_0", "read_file", '{"path": "notes.txt"}'),
                            ToolCall("call_0_1", "list_dir", '{"path": "."}')]
    assert finish(first).finish_reason == "tool_calls"
    history = said("please read my notes",
                   {"role": "assistant", "content": "Reading it.",
                    "tool_calls": [{"id": "call_0_0", "type": "function",
                                    "function": {"name": "read_file", "arguments": "{}"}}]},
                   {"role": "tool", "tool_call_id": "call_0_0", "content": "hello"})
    second = await events_of(provider, history)
    assert text_of(second) == "The file says hello."
    assert finish(second).finish_reason == "stop"


async def test_r2_10_mock_scripted_error_and_mid_stream_failure() -> None:
    provider = mock()
    with pytest.raises(ProviderHTTPError) as caught:
        await events_of(provider, said("fail"))
    assert caught.value.details["upstream_status"] == 503
    assert "mock overloaded" in caught.value.message
    got: list[str] = []
    with pytest.raises(ProviderConnectionError):
        async for event in provider.stream(said("cut")):
            got.append(getattr(event, "text", ""))
    assert got == ["one ", "two "]


async def test_r2_10_mock_reasoning_and_finish_reason() -> None:
    events = await events_of(mock(), said("think"))
    assert events[0] == ReasoningDelta("Let me think.")
    assert finish(events).finish_reason == "length"


async def test_r2_10_mock_delays_and_timeouts() -> None:
    script = [{"text": "a b c", "delay": 0.1, "token_delay": 0.05}]
    provider = mock(script=script)
    start = time.monotonic()
    assert text_of(await events_of(provider, said("x"))) == "a b c"
    assert time.monotonic() - start >= 0.2
    slow = mock(script=[{"text": "late", "delay": 5}])
    with pytest.raises(ProviderTimeout) as caught:
        await events_of(slow, said("x"))
    assert caught.value.details["which"] == "first_token"


async def test_r2_10_mock_tokens_per_delta_stop_and_max_tokens() -> None:
    provider = mock(script=[{"text": "one two three four five"}], tokens_per_delta=2)
    assert deltas(await events_of(provider, said("x"))) == ["one two ", "three four ", "five"]
    stopped = await events_of(provider, ProviderRequest(
        messages=said("x").messages, stop=[" four"]))
    assert text_of(stopped) == "one two three" and finish(stopped).finish_reason == "stop"
    short = await events_of(provider, ProviderRequest(messages=said("x").messages,
                                                      max_tokens=4))
    assert text_of(short) == "one two " and finish(short).finish_reason == "length"


async def test_r2_10_mock_request_script_and_text_mode() -> None:
    provider = make_provider(Connection(id="m", name="m", kind="mock"))
    request = ProviderRequest(prompt="<|user|>hi<|assistant|>",
                              params={"script": [{"match": "hi", "text": "Hello."}]})
    answer = await provider.complete(request)
    assert answer.text == "Hello." and answer.finish_reason == "stop"
    echoed = await provider.complete(ProviderRequest(prompt="abc"))
    assert echoed.text == "(mock) I read a prompt of 3 characters."
    assert await provider.count_tokens("x" * 67) == 20


@pytest.mark.parametrize("script", [
    [{"match": "("}],
    [{"txt": "typo"}],
    [{"error": {"message": "no status"}}],
    [{"delay": -1}],
    {"text": "not a list"},
])
def test_r2_10_mock_rejects_a_bad_script(script: Any) -> None:
    with pytest.raises(InvalidInput):
        make_provider(Connection(id="m", name="m", kind="mock", params={"script": script}))


async def test_r2_10_mock_deltas_are_text_events_only() -> None:
    events = await events_of(mock(), said("hello"))
    assert all(isinstance(e, TextDelta) for e in events[:-1])
