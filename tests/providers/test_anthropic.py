"""anthropic over loopback against the fake /v1/messages (R2.10, R2.12)."""

from __future__ import annotations

import httpx
import pytest

from evacore.errors import ProviderHTTPError
from evacore.providers import ToolCall, make_provider
from evacore.providers.anthropic import build_request_body
from tests.fakes.script import FakeToolCall, Reply
from tests.fakes.upstream import FakeUpstream
from tests.providers.helpers import calls, chat_request, deltas, events_of, finish, text_of

PNG_B64 = "iVBORw0KGgoAAAANSUhEUg=="
TOOLS = [{"type": "function", "function": {
    "name": "read_file", "description": "Read a file",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}]

HISTORY = [
    {"role": "system", "content": "You are Eva."},
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": "Look:"},
                                 {"type": "image_url",
                                  "image_url": {"url": f"data:image/jpeg;base64,{PNG_B64}"}}]},
    {"role": "assistant", "content": "Reading both.", "tool_calls": [
        {"id": "t1", "type": "function",
         "function": {"name": "read_file", "arguments": '{"path": "a"}'}},
        {"id": "t2", "type": "function",
         "function": {"name": "read_file", "arguments": '{"path": "b"}'}}]},
    {"role": "tool", "tool_call_id": "t1", "content": "A"},
    {"role": "tool", "tool_call_id": "t2", "content": "B"},
    {"role": "system", "content": "<system-reminder>x</system-reminder>"},
]


def test_r2_10_anthropic_body_shape() -> None:
    conn = FakeUpstream("anthropic").connection(vision=True, params={
        "temperature": 0.5, "top_k": 10, "min_p": 0.1, "tool_choice": "required",
        "script": [], "prefill_as_assistant": False})
    body = build_request_body(conn, chat_request(messages=HISTORY, tools=TOOLS, stop=["\nH:"],
                                                 prefill="Sure, "), stream=True)
    assert set(body) == {"model", "max_tokens", "system", "messages", "stream",
                         "stop_sequences", "tools", "tool_choice", "temperature", "top_k"}
    assert body["system"] == "You are Eva.\n\nBe brief."
    assert body["tool_choice"] == {"type": "any"}
    assert body["tools"] == [{"name": "read_file", "description": "Read a file",
                              "input_schema": TOOLS[0]["function"]["parameters"]}]
    assert body["messages"] == [
        {"role": "user", "content": [
            {"type": "text", "text": "Look:"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg",
                                         "data": PNG_B64}}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Reading both."},
            {"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "a"}},
            {"type": "tool_use", "id": "t2", "name": "read_file", "input": {"path": "b"}}]},
        # both results in one user turn, the later system note after them
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "A"},
            {"type": "tool_result", "tool_use_id": "t2", "content": "B"},
            {"type": "text", "text": "<system-reminder>x</system-reminder>"}]},
        # the prefill, trailing whitespace trimmed as the API demands
        {"role": "assistant", "content": [{"type": "text", "text": "Sure,"}]},
    ]


def test_r2_10_anthropic_images_need_vision_and_cache_switch() -> None:
    conn = FakeUpstream("anthropic").connection(vision=False, params={"prompt_cache": True})
    body = build_request_body(conn, chat_request(messages=HISTORY[:3]), stream=False)
    marker = body["messages"][0]["content"][1]
    assert (marker["type"], marker["text"]) == ("text", "[image]")
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert marker["cache_control"] == {"type": "ephemeral"}  # the last block of the prompt


async def test_r2_10_anthropic_streams_text_and_tool_use(
    anthropic_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    anthropic_fake.script.add(Reply(
        text="Checking the file.",
        tool_calls=[FakeToolCall("read_file", '{"path": "notes.md"}', "toolu_1")]))
    provider = make_provider(anthropic_fake.connection(), client=http_client)
    events = await events_of(provider, chat_request(tools=TOOLS))
    assert text_of(events) == "Checking the file."
    assert calls(events) == [ToolCall("toolu_1", "read_file", '{"path": "notes.md"}')]
    end = finish(events)
    assert end.finish_reason == "tool_calls"
    assert end.usage is not None and end.usage.completion_tokens > 0
    request = anthropic_fake.generation_requests[-1]
    assert request.headers["x-api-key"] == "sk-fake-secret-key-0123456789"
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in request.headers
    assert request.json["system"] == "You are Eva."


@pytest.mark.parametrize(("fake_reason", "expected"),
                         [("stop", "stop"), ("length", "length")])
async def test_r2_10_anthropic_stop_reasons_normalised(
    anthropic_fake: FakeUpstream, http_client: httpx.AsyncClient, fake_reason: str,
    expected: str,
) -> None:
    anthropic_fake.script.reply("Some text", finish_reason=fake_reason)
    provider = make_provider(anthropic_fake.connection(), client=http_client)
    assert finish(await events_of(provider, chat_request())).finish_reason == expected


async def test_r2_12_anthropic_prefill_continues_without_double_space(
    anthropic_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    # "Sure, " is sent as "Sure,"; the model continues with " here"; the caller prepends
    # "Sure, " to the first delta, so the adapter drops the doubled leading space
    anthropic_fake.script.add(Reply(chunks=[" ", " here", " it is."]))
    provider = make_provider(anthropic_fake.connection(), client=http_client)
    events = await events_of(provider, chat_request(prefill="Sure, "))
    assert deltas(events) == ["here", " it is."]
    assert anthropic_fake.last_body["messages"][-1] == {
        "role": "assistant", "content": [{"type": "text", "text": "Sure,"}]}
    anthropic_fake.script.reply(" here it is.")
    answer = await provider.complete(chat_request(prefill="Sure, "))
    assert answer.text == "here it is."


async def test_r2_10_anthropic_complete_non_stream(
    anthropic_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    anthropic_fake.script.add(Reply(text="Let me see.", reasoning="hmm",
                                    tool_calls=[FakeToolCall("list_dir", '{"path": "."}')]))
    provider = make_provider(anthropic_fake.connection(), client=http_client)
    answer = await provider.complete(chat_request(tools=TOOLS))
    assert answer.text == "Let me see."
    assert answer.reasoning == "hmm"
    assert answer.tool_calls == [ToolCall("toolu_fake_0", "list_dir", '{"path":"."}')]
    assert answer.finish_reason == "tool_calls"
    assert anthropic_fake.last_body["stream"] is False


async def test_r2_11_anthropic_error_event_after_tokens_is_not_retried(
    anthropic_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    anthropic_fake.script.reply("one two three", error_event_after=2, error_message="Overloaded")
    provider = make_provider(anthropic_fake.connection(), client=http_client)
    got: list[str] = []
    with pytest.raises(ProviderHTTPError) as caught:
        async for event in provider.stream(chat_request()):
            got.append(getattr(event, "text", ""))
    assert got == ["one ", "two "]
    assert caught.value.details["upstream_status"] == 529
    assert "Overloaded" in caught.value.message
    assert len(anthropic_fake.generation_requests) == 1


async def test_r2_11_anthropic_overloaded_before_first_token_is_retried(
    anthropic_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    anthropic_fake.script.reply("lost", error_event_after=0).reply("Second try.")
    provider = make_provider(anthropic_fake.connection(), client=http_client)
    assert text_of(await events_of(provider, chat_request())) == "Second try."
    assert len(anthropic_fake.generation_requests) == 2


async def test_r2_6_anthropic_count_tokens(
    anthropic_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    provider = make_provider(anthropic_fake.connection(), client=http_client)
    count = await provider.count_tokens("Hello there")
    assert isinstance(count, int) and count > 0
    sent = anthropic_fake.bodies("/v1/messages/count_tokens")
    assert sent == [{"model": "fake-model",
                     "messages": [{"role": "user", "content": "Hello there"}]}]


async def test_anthropic_writes_speaker_names_into_example_and_named_turns(
    anthropic_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    anthropic_fake.script.reply("ok")
    provider = make_provider(anthropic_fake.connection(), client=http_client)
    await provider.complete(chat_request(char_name="Eva", user_name="Ann", messages=[
        {"role": "system", "content": "Main."},
        {"role": "system", "content": "[Example Chat]"},
        {"role": "system", "name": "example_user", "content": "Is it late?"},
        {"role": "system", "name": "example_assistant", "content": "Eva: Very."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "name": "Bo", "content": "Hello."},
        {"role": "user", "name": "Ann", "content": "Ann: again"},
    ]))
    body = anthropic_fake.last_body
    # examples are leading system messages: in the system text, with the names in front
    # (never twice)
    assert body["system"] == "Main.\n\n[Example Chat]\n\nAnn: Is it late?\n\nEva: Very."
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Bo: Hello."}]},
        {"role": "user", "content": [{"type": "text", "text": "Ann: again"}]},
    ]


async def test_anthropic_empty_texts_and_a_system_only_prompt(
    anthropic_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    provider = make_provider(anthropic_fake.connection(), client=http_client)
    anthropic_fake.script.reply("ok")
    await provider.complete(chat_request(messages=[
        {"role": "system", "content": "Main."}, {"role": "user", "content": ""},
        {"role": "assistant", "content": ""}, {"role": "user", "content": "go"}]))
    # an empty text is a zero-width space (the API refuses empty blocks), not dropped
    assert [m["content"] for m in anthropic_fake.last_body["messages"]] == [
        [{"type": "text", "text": "\u200b"}], [{"type": "text", "text": "\u200b"}],
        [{"type": "text", "text": "go"}]]
    # only system messages: SillyTavern's placeholder user turn, not an empty list
    anthropic_fake.script.reply("ok")
    await provider.complete(chat_request(messages=[{"role": "system", "content": "Main."}]))
    assert anthropic_fake.last_body["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "Let's get started. Please generate your response based on "
                                 "the information and instructions provided above."}]}]
    # a conversation opening with the greeting gets it too, and the text is a param
    anthropic_fake.script.reply("ok")
    provider = make_provider(anthropic_fake.connection(params={
        "human_sysprompt_message": "[Start]"}), client=http_client)
    await provider.complete(chat_request(messages=[
        {"role": "system", "content": "Main."}, {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "hi"}]))
    assert anthropic_fake.last_body["messages"][0] == {
        "role": "user", "content": [{"type": "text", "text": "[Start]"}]}
