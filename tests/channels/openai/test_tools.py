"""R14.1 tools: a client's declared tools are offered next to evacore's; an answer that calls
one ends the response with the client's `tool_calls` (after evacore ran its own calls of that
answer); the client's `tool` messages continue the same chat. A client tool named like an
evacore tool replaces it for that request."""

from __future__ import annotations

import json

import httpx
import openai

from evacore.core import Core
from tests.channels.openai.conftest import messages, sent_messages
from tests.fakes.script import FakeToolCall, Reply
from tests.fakes.upstream import FakeUpstream

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}
ASK = [{"role": "user", "content": "Weather in Oslo?"}]


def offered(fake: FakeUpstream, index: int = -1) -> list[str]:
    return [t["function"]["name"] for t in fake.generation_requests[index].json.get("tools", [])]


async def test_r14_1_client_tool_round_trip_in_one_chat(
    oai: openai.AsyncOpenAI, client: httpx.AsyncClient, upstream: FakeUpstream
) -> None:
    upstream.script.tool_call("get_weather", {"city": "Oslo"}, id="call_w1", text="Let me check.")
    raw = await oai.chat.completions.with_raw_response.create(model="@up", messages=ASK,
                                                             tools=[WEATHER])
    done = raw.parse()
    chat = raw.headers["x-evacore-chat"]
    assert "get_weather" in offered(upstream) and "read_file" in offered(upstream)
    choice = done.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content == "Let me check."
    [call] = choice.message.tool_calls
    assert (call.id, call.type, call.function.name) == ("call_w1", "function", "get_weather")
    assert json.loads(call.function.arguments) == {"city": "Oslo"}
    assert len(upstream.generation_requests) == 1  # evacore did not run the client's tool
    # the result comes back with the next request; the same chat goes on from it
    upstream.script.reply("It is sunny in Oslo.")
    raw = await oai.chat.completions.with_raw_response.create(model="@up", tools=[WEATHER],
                                                             messages=[
        *ASK, choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": "call_w1", "content": "sunny, 21 C"}])
    assert raw.headers["x-evacore-chat"] == chat
    assert raw.parse().choices[0].message.content == "It is sunny in Oslo."
    tail = sent_messages(upstream)[-2:]
    assert tail[0]["role"] == "assistant" and tail[0]["tool_calls"][0]["id"] == "call_w1"
    assert tail[1] == {"role": "tool", "tool_call_id": "call_w1", "content": "sunny, 21 C"}
    stored = await messages(client, chat)
    assert [m["role"] for m in stored] == ["user", "assistant", "assistant"]
    [step] = stored[1]["variants"][0]["steps"]
    assert step["tool_calls"][0]["name"] == "get_weather"
    assert step["results"] == [{"id": "call_w1", "content": "sunny, 21 C"}]
    assert stored[2]["content"] == "It is sunny in Oslo."


async def test_r14_1_streamed_tool_call_deltas_through_the_sdk_helper(
    oai: openai.AsyncOpenAI, upstream: FakeUpstream
) -> None:
    upstream.script.tool_call("get_weather", {"city": "Bergen"}, id="call_b", text="Checking.")
    async with oai.chat.completions.stream(model="@up", messages=ASK, tools=[WEATHER]) as s:
        kinds = [event.type async for event in s]
        final = await s.get_final_completion()
    assert "content.delta" in kinds and "tool_calls.function.arguments.done" in kinds
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content == "Checking."
    [call] = choice.message.tool_calls
    assert call.id == "call_b" and call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Bergen"}
    # a plain answer through the same helper
    upstream.script.reply("Just words.")
    async with oai.chat.completions.stream(model="@up", messages=[
            {"role": "user", "content": "Say words."}]) as s:
        final = await s.get_final_completion()
    assert final.choices[0].message.content == "Just words."


async def test_r14_1_evacore_runs_its_own_calls_first_then_hands_over(
    oai: openai.AsyncOpenAI, client: httpx.AsyncClient, core: Core, upstream: FakeUpstream
) -> None:
    notes = core.settings.workspace_dir / "notes.txt"
    notes.parent.mkdir(parents=True, exist_ok=True)
    notes.write_text("the trip is to Oslo")
    upstream.script.add(Reply(text="", tool_calls=[
        FakeToolCall("read_file", json.dumps({"path": "notes.txt"}), "call_r"),
        FakeToolCall("get_weather", json.dumps({"city": "Oslo"}), "call_w")]))
    stream = await oai.chat.completions.create(model="@up", messages=ASK, tools=[WEATHER],
                                               stream=True)
    chunks = [c async for c in stream]
    deltas = [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]
    assert [(d.index, d.id, d.function.name) for d in deltas] == [(0, "call_w", "get_weather")]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    chat_id = stream.response.headers["x-evacore-chat"]
    [_, answer] = await messages(client, chat_id)
    [step] = answer["variants"][0]["steps"]
    assert [c["name"] for c in step["tool_calls"]] == ["read_file", "get_weather"]
    assert [(r["id"], r["content"]) for r in step["results"]] == [
        ("call_r", "the trip is to Oslo")]  # the client's own call waits for its result
    upstream.script.reply("Oslo: sunny, as your notes asked.")
    done = await oai.chat.completions.create(model="@up", tools=[WEATHER], messages=[
        *ASK, {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_w", "type": "function",
             "function": {"name": "get_weather", "arguments": json.dumps({"city": "Oslo"})}}]},
        {"role": "tool", "tool_call_id": "call_w", "content": "sunny"}])
    assert done.choices[0].message.content == "Oslo: sunny, as your notes asked."
    sent = sent_messages(upstream)
    assert [m.get("tool_call_id") for m in sent if m["role"] == "tool"] == ["call_r", "call_w"]
    assert len(await messages(client, chat_id)) == 3


async def test_r14_1_a_client_tool_named_like_an_evacore_tool_replaces_it(
    oai: openai.AsyncOpenAI, core: Core, upstream: FakeUpstream
) -> None:
    mine = {"type": "function", "function": {
        "name": "read_file", "description": "Reads a file on the client's machine.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}
    upstream.script.tool_call("read_file", {"path": "notes.txt"}, id="call_x")
    done = await oai.chat.completions.create(model="@up", messages=ASK, tools=[mine])
    tools = upstream.generation_requests[-1].json["tools"]
    same = [t for t in tools if t["function"]["name"] == "read_file"]
    assert len(same) == 1 and same[0]["function"]["description"].startswith("Reads a file on")
    assert done.choices[0].finish_reason == "tool_calls"
    assert done.choices[0].message.tool_calls[0].id == "call_x"
    assert len(upstream.generation_requests) == 1


async def test_r14_1_a_conversation_with_unknown_tool_steps_is_imported_whole(
    oai: openai.AsyncOpenAI, client: httpx.AsyncClient, upstream: FakeUpstream
) -> None:
    upstream.script.reply("Both cities are warm.")
    call = {"id": "call_old", "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}}
    raw = await oai.chat.completions.with_raw_response.create(model="@up", tools=[WEATHER],
                                                             messages=[
        {"role": "user", "content": "Rome?"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_old", "content": "warm"},
        {"role": "assistant", "content": "Rome is warm."},
        {"role": "user", "content": "And Madrid?"}])
    assert raw.parse().choices[0].message.content == "Both cities are warm."
    stored = await messages(client, raw.headers["x-evacore-chat"])
    assert [m["role"] for m in stored] == ["user", "assistant", "assistant", "user", "assistant"]
    [step] = stored[1]["variants"][0]["steps"]
    assert step["results"] == [{"id": "call_old", "content": "warm"}]
    sent = sent_messages(upstream)
    assert {"role": "tool", "tool_call_id": "call_old", "content": "warm"} in sent
    # the answer after tool results, asked again, is a new variant of that answer
    upstream.script.tool_call("get_weather", {"city": "Oslo"}, id="call_n")
    first = await oai.chat.completions.create(model="@up", messages=ASK, tools=[WEATHER])
    again = [*ASK, first.choices[0].message.model_dump(exclude_none=True),
             {"role": "tool", "tool_call_id": "call_n", "content": "cold"}]
    upstream.script.reply("Cold, take a coat.").reply("It is cold in Oslo.")
    raw1 = await oai.chat.completions.with_raw_response.create(model="@up", messages=again,
                                                              tools=[WEATHER])
    raw2 = await oai.chat.completions.with_raw_response.create(model="@up", messages=again,
                                                              tools=[WEATHER])
    chat = raw1.headers["x-evacore-chat"]
    assert raw2.headers["x-evacore-chat"] == chat
    stored = await messages(client, chat)
    assert [m["role"] for m in stored] == ["user", "assistant", "assistant"]
    assert [v["content"] for v in stored[2]["variants"]] == [
        "Cold, take a coat.", "It is cold in Oslo."]
    assert stored[1]["variants"][0]["steps"][0]["results"] == [
        {"id": "call_n", "content": "cold"}]  # stored once


async def test_r14_1_tool_choice_applies_to_the_first_request_of_the_answer(
    oai: openai.AsyncOpenAI, core: Core, upstream: FakeUpstream
) -> None:
    notes = core.settings.workspace_dir / "notes.txt"
    notes.parent.mkdir(parents=True, exist_ok=True)
    notes.write_text("hello")
    upstream.script.tool_call("read_file", {"path": "notes.txt"}, id="call_1")
    upstream.script.reply("The file says hello.")
    forced = {"type": "function", "function": {"name": "read_file"}}
    done = await oai.chat.completions.create(model="@up", messages=ASK, tools=[WEATHER],
                                             tool_choice=forced)
    assert done.choices[0].message.content == "The file says hello."
    first, second = (r.json for r in upstream.generation_requests[-2:])
    assert first["tool_choice"] == forced and "tool_choice" not in second
    # without client tools a choice is not sent (nothing of the client's to choose from)
    upstream.script.reply("Plain.")
    await oai.chat.completions.create(model="@up", messages=[
        {"role": "user", "content": "x"}], tool_choice="none")
    assert "tool_choice" not in upstream.generation_requests[-1].json
