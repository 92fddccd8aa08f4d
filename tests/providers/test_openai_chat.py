"""openai-chat over loopback against the fake /v1/chat/completions (R2.10, R2.12)."""

from __future__ import annotations

import json

import httpx

from evacore.providers import Finish, ToolCall, Usage, make_provider
from evacore.providers.openai_chat import build_request_body
from tests.fakes.script import FakeToolCall, Reply
from tests.fakes.upstream import FakeUpstream
from tests.providers.helpers import (
    calls,
    chat_request,
    deltas,
    events_of,
    finish,
    text_of,
)

PNG = "data:image/png;base64,iVBORw0KGgo="


async def test_r2_10_openai_chat_streams_text_with_usage(
    openai_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    openai_fake.script.reply("Hi there, Master.")
    provider = make_provider(openai_fake.connection(), client=http_client)
    events = await events_of(provider, chat_request())
    assert deltas(events) == ["Hi ", "there, ", "Master."]
    end = finish(events)
    assert end.finish_reason == "stop"
    assert end.model == "fake-model"
    assert isinstance(end.usage, Usage) and end.usage.completion_tokens > 0
    assert end.usage.total_tokens == end.usage.prompt_tokens + end.usage.completion_tokens
    sent = openai_fake.last_body
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    headers = openai_fake.generation_requests[-1].headers
    assert headers["authorization"] == "Bearer sk-fake-secret-key-0123456789"


async def test_r2_10_openai_chat_joins_tool_call_fragments(
    openai_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    openai_fake.script.add(Reply(
        text="Let me check.",
        tool_calls=[FakeToolCall("read_file", '{"path": "notes/todo.txt"}', "call_a"),
                    FakeToolCall("list_dir", '{"path": "."}', "call_b")],
    ))
    provider = make_provider(openai_fake.connection(), client=http_client)
    events = await events_of(provider, chat_request())
    assert text_of(events) == "Let me check."
    assert calls(events) == [
        ToolCall("call_a", "read_file", '{"path": "notes/todo.txt"}'),
        ToolCall("call_b", "list_dir", '{"path": "."}'),
    ]
    assert finish(events).finish_reason == "tool_calls"
    # tool calls come whole, after the text, before Finish
    kinds = [type(e).__name__ for e in events]
    assert kinds[-3:] == ["ToolCall", "ToolCall", "Finish"]


async def test_r2_10_openai_chat_complete_non_stream_with_tools(
    openai_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    openai_fake.script.tool_call("shell", {"command": "ls -la"}, id="call_9")
    provider = make_provider(openai_fake.connection(), client=http_client)
    tools = [{"type": "function", "function": {"name": "shell", "description": "Run a command",
                                               "parameters": {"type": "object"}}}]
    answer = await provider.complete(chat_request(tools=tools))
    assert answer.tool_calls == [ToolCall("call_9", "shell", '{"command": "ls -la"}')]
    assert answer.finish_reason == "tool_calls"
    assert answer.usage is not None
    sent = openai_fake.last_body
    assert sent["stream"] is False and "stream_options" not in sent
    assert sent["tools"] == tools


async def test_r2_10_openai_chat_replays_tool_steps_in_history(
    openai_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    messages = [
        {"role": "user", "content": "What is in a.txt?"},
        {"role": "assistant", "content": "",
         "tool_calls": [{"id": "c1", "name": "read_file", "arguments": '{"path":"a.txt"}'}]},
        {"role": "tool", "tool_call_id": "c1", "content": "hello"},
    ]
    provider = make_provider(openai_fake.connection(), client=http_client)
    await events_of(provider, chat_request(messages=messages))
    sent = openai_fake.last_body["messages"]
    assert sent[1]["tool_calls"] == [{"id": "c1", "type": "function",
                                      "function": {"name": "read_file",
                                                   "arguments": '{"path":"a.txt"}'}}]
    assert sent[2] == {"role": "tool", "content": "hello", "tool_call_id": "c1"}


async def test_r2_10_openai_chat_images_only_on_vision_connections(
    openai_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    content = [{"type": "text", "text": "What is this?"},
               {"type": "image_url", "image_url": {"url": PNG}}]
    request = chat_request(messages=[{"role": "user", "content": content}])
    seeing = make_provider(openai_fake.connection(vision=True), client=http_client)
    await events_of(seeing, request)
    assert openai_fake.last_body["messages"][0]["content"] == content
    blind = make_provider(openai_fake.connection(vision=False), client=http_client)
    await events_of(blind, request)
    assert openai_fake.last_body["messages"][0]["content"] == "What is this?\n[image]"


async def test_r2_12_openai_chat_prefill_is_a_trailing_assistant_turn(
    openai_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    openai_fake.script.reply(" the answer.")
    provider = make_provider(openai_fake.connection(), client=http_client)
    events = await events_of(provider, chat_request(prefill="Here is"))
    assert openai_fake.last_body["messages"][-1] == {"role": "assistant", "content": "Here is"}
    assert text_of(events) == " the answer."  # the caller prepends the prefill, once


def test_r2_12_openai_chat_prefill_switches() -> None:
    fake_conn = FakeUpstream().connection()
    off = build_request_body(fake_conn, chat_request(prefill="Sure",
                                                     params={"prefill_as_assistant": False}),
                             stream=True)
    assert off["messages"][-1]["role"] == "user"
    flagged = build_request_body(fake_conn, chat_request(prefill="Sure",
                                                         params={"assistant_prefix": True}),
                                 stream=True)
    assert flagged["messages"][-1] == {"role": "assistant", "content": "Sure", "prefix": True}


def test_r2_10_openai_chat_body_has_only_known_fields() -> None:
    conn = FakeUpstream().connection(params={
        "temperature": 0.7, "top_k": 40, "rep_pen": 1.1, "script": [], "prefill_as_assistant": True,
        "max_tokens_field": "max_completion_tokens", "extra_headers": {"X-Title": "evacore"},
    })
    messages = [{"id": "m1", "source": "card.description", "protected": True, "role": "system",
                 "content": "You are Eva."},
                {"id": "m2", "role": "user", "name": "Ann Smith!", "content": "Hi"}]
    body = build_request_body(conn, chat_request(messages=messages, stop=["\nUser:"]),
                              stream=True)
    assert set(body) == {"model", "messages", "stream", "stream_options",
                         "max_completion_tokens", "stop", "temperature", "top_k"}
    assert body["messages"] == [{"role": "system", "content": "You are Eva."},
                                {"role": "user", "content": "Hi", "name": "Ann_Smith_"}]
    assert body["max_completion_tokens"] == 512


async def test_r2_10_openai_chat_extra_body_and_headers_are_sent(
    openai_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    conn = openai_fake.connection(params={"extra_body": {"provider": {"order": ["x"]}},
                                          "extra_headers": {"HTTP-Referer": "https://eva"}})
    await events_of(make_provider(conn, client=http_client), chat_request())
    assert openai_fake.last_body["provider"] == {"order": ["x"]}
    assert openai_fake.generation_requests[-1].headers["http-referer"] == "https://eva"


async def test_r2_10_openai_chat_reasoning_is_its_own_event(
    openai_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    openai_fake.script.reply("42.", reasoning="Six times seven.")
    provider = make_provider(openai_fake.connection(), client=http_client)
    events = await events_of(provider, chat_request())
    assert type(events[0]).__name__ == "ReasoningDelta"
    assert text_of(events) == "42."
    answer = await provider.complete(chat_request())
    assert answer.text == "Hello from the fake upstream."


async def test_r2_10_openai_chat_base_url_without_v1(
    openai_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    provider = make_provider(openai_fake.connection(base_url=openai_fake.url + "/"),
                             client=http_client)
    assert provider.wire_request(chat_request()).url == openai_fake.url + "/v1/chat/completions"
    assert text_of(await events_of(provider, chat_request())) == "Hello from the fake upstream."


async def test_r2_10_stop_strings_cut_the_answer_and_close_upstream(
    openai_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    # a backend that ignores `stop` keeps talking for the user; the adapter cuts it
    openai_fake.script.add(Reply(chunks=["Fine, thanks.", "\nUs", "er: and you?", " more"] * 20,
                                 token_delay=0.01))
    provider = make_provider(openai_fake.connection(), client=http_client)
    events = await events_of(provider, chat_request(stop=["\nUser:"]))
    assert text_of(events) == "Fine, thanks."
    assert finish(events) == Finish("stop")
    assert openai_fake.last_body["stop"] == ["\nUser:"]
    assert await openai_fake.await_client_left(1.0)


async def test_r2_10_openai_chat_complete_cuts_at_stop(
    openai_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    openai_fake.script.reply("Fine.\nUser: hi")
    provider = make_provider(openai_fake.connection(), client=http_client)
    answer = await provider.complete(chat_request(stop=["\nUser:"]))
    assert answer.text == "Fine."


async def test_r2_6_llamacpp_tokenize_counts_remotely(
    llamacpp_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    provider = make_provider(llamacpp_fake.connection(), client=http_client)
    assert await provider.count_tokens("Hello, world") == 3
    assert llamacpp_fake.bodies("/tokenize") == [{"content": "Hello, world"}]
    missing = make_provider(llamacpp_fake.connection(base_url=llamacpp_fake.url + "/x/v1"),
                            client=http_client)
    assert await missing.count_tokens("Hello") is None
    assert await missing.count_tokens("Hello") is None
    assert len([r for r in llamacpp_fake.requests if r.path == "/x/tokenize"]) == 1


async def test_r2_15_wire_request_redacts_the_key(
    openai_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    provider = make_provider(openai_fake.connection(), client=http_client)
    wire = provider.wire_request(chat_request())
    assert wire.headers["Authorization"] == "***"
    assert "sk-fake" not in json.dumps(wire.body) + json.dumps(wire.headers)


async def test_r2_11_keep_alive_connection_is_reused_between_steps(
    openai_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    provider = make_provider(openai_fake.connection(), client=http_client)
    for _ in range(3):
        assert text_of(await events_of(provider, chat_request()))
    await provider.complete(chat_request())
    assert openai_fake.server.connections_total == 1


def test_r2_10_plain_messages_go_as_they_are_and_every_other_shape_is_checked() -> None:
    from evacore.errors import InvalidInput
    from evacore.providers.openai_chat import serialize_messages

    plain = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert serialize_messages(plain, False) == plain
    named = serialize_messages([{"role": "user", "content": "Hi", "name": "Ann Lee"}], False)
    assert named == [{"role": "user", "content": "Hi", "name": "Ann_Lee"}]
    tool = serialize_messages([{"role": "tool", "content": "42"}], False)
    assert tool == [{"role": "tool", "content": "42", "tool_call_id": ""}]
    try:
        serialize_messages([{"role": "narrator", "content": "Once"}], False)
    except InvalidInput as exc:
        assert "narrator" in str(exc)
    else:
        raise AssertionError("an unknown role went out")
