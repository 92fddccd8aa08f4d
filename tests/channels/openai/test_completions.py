"""R14.1 through the official `openai` SDK: models list, non-stream and stream answers (with
and without usage), sampler fields and images reaching the upstream, client system messages."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import openai
from fastapi import FastAPI

from tests.channels.openai.conftest import add_character, messages, sent_messages
from tests.fakes.upstream import FakeUpstream

PIXEL = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"0" * 16).decode()


async def test_r14_1_models_lists_characters_and_connections(
    oai: openai.AsyncOpenAI, client: httpx.AsyncClient, upstream: FakeUpstream
) -> None:
    await add_character(client, "Orla")
    page = await oai.models.list()
    ids = [m.id for m in page.data]
    assert "Orla" in ids and "@up" in ids and "@mock" in ids
    assert all(m.object == "model" and m.owned_by == "evacore" and m.created > 0
               for m in page.data)


async def test_r14_1_non_stream_completion(oai: openai.AsyncOpenAI, client: httpx.AsyncClient,
                                           upstream: FakeUpstream) -> None:
    upstream.script.reply("Hello there, traveller.")
    raw = await oai.chat.completions.with_raw_response.create(
        model="@up", messages=[{"role": "user", "content": "Hi!"}])
    done = raw.parse()
    assert done.object == "chat.completion"
    assert done.choices[0].message.role == "assistant"
    assert done.choices[0].message.content == "Hello there, traveller."
    assert done.choices[0].message.tool_calls is None
    assert done.choices[0].finish_reason == "stop"
    assert done.usage is not None and done.usage.total_tokens > 0
    chat_id, tour_id = raw.headers["x-evacore-chat"], raw.headers["x-evacore-tour"]
    assert done.id == f"chatcmpl-{tour_id}" and done.model == "@up"
    stored = await messages(client, chat_id)
    assert [(m["role"], m["content"]) for m in stored] == [
        ("user", "Hi!"), ("assistant", "Hello there, traveller.")]


async def test_r14_1_stream_without_usage(oai: openai.AsyncOpenAI,
                                          upstream: FakeUpstream) -> None:
    upstream.script.reply("One two three four.")
    stream = await oai.chat.completions.create(
        model="@up", messages=[{"role": "user", "content": "Count."}], stream=True)
    chunks = [c async for c in stream]
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "One two three four."
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert all(c.choices for c in chunks) and all(c.usage is None for c in chunks)
    assert [c.choices[0].finish_reason for c in chunks[:-1]] == [None] * (len(chunks) - 1)


async def test_r14_1_stream_with_usage_ends_with_a_usage_only_chunk(
    oai: openai.AsyncOpenAI, app: FastAPI, upstream: FakeUpstream
) -> None:
    upstream.script.reply("Short answer.")
    stream = await oai.chat.completions.create(
        model="@up", messages=[{"role": "user", "content": "Hi"}], stream=True,
        stream_options={"include_usage": True})
    chunks = [c async for c in stream]
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens == (chunks[-1].usage.prompt_tokens
                                             + chunks[-1].usage.completion_tokens) > 0
    assert chunks[-2].choices[0].finish_reason == "stop"
    # on the wire: SSE data lines, `[DONE]` last
    upstream.script.reply("Again.")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://evacore.test") as raw:
        r = await raw.post("/v1/chat/completions", headers={"Authorization":
                                                            f"Bearer {oai.api_key}"},
                           json={"model": "@up", "stream": True,
                                 "messages": [{"role": "user", "content": "Other"}]})
    assert r.headers["content-type"].startswith("text/event-stream")
    lines = [line for line in r.text.split("\n") if line]
    assert all(line.startswith("data: ") for line in lines) and lines[-1] == "data: [DONE]"
    assert '"usage"' not in r.text


async def test_r14_1_sampler_fields_reach_the_upstream_within_limits(
    oai: openai.AsyncOpenAI, upstream: FakeUpstream
) -> None:
    await oai.chat.completions.create(
        model="@up", messages=[{"role": "user", "content": "Hi"}], temperature=0.3, top_p=0.9,
        max_tokens=100_000, stop=["END"], presence_penalty=0.5, frequency_penalty=-0.5,
        seed=7, extra_body={"an_unknown_field": {"nested": True}, "logit_bias_x": 1})
    body = upstream.generation_requests[-1].json
    assert body["temperature"] == 0.3 and body["top_p"] == 0.9 and body["seed"] == 7
    assert body["presence_penalty"] == 0.5 and body["frequency_penalty"] == -0.5
    assert body["stop"] == ["END"]
    assert body["max_tokens"] == 128  # the connection's max_tokens is the ceiling
    assert "an_unknown_field" not in body
    await oai.chat.completions.create(
        model="@up", messages=[{"role": "user", "content": "Hi again"}],
        max_completion_tokens=20)
    assert upstream.generation_requests[-1].json["max_tokens"] == 20


async def test_r14_1_client_system_messages_follow_the_character_prompt_unstored(
    oai: openai.AsyncOpenAI, client: httpx.AsyncClient, upstream: FakeUpstream
) -> None:
    await add_character(client, "Orla", system_prompt="You are {{char}}, keeper of a light.")
    raw = await oai.chat.completions.with_raw_response.create(model="Orla@up", messages=[
        {"role": "system", "content": "Client rule one: {{char}} stays literal."},
        {"role": "developer", "content": [{"type": "text", "text": "Client rule two."}]},
        {"role": "user", "content": "Hello"}])
    sent = sent_messages(upstream)
    assert sent[0] == {"role": "system", "content": "You are Orla, keeper of a light."}
    assert sent[1]["content"] == "Client rule one: {{char}} stays literal."
    assert sent[2]["content"] == "Client rule two."
    stored = await messages(client, raw.headers["x-evacore-chat"])
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert "Client rule" not in str(stored)


async def test_r14_1_image_parts_reach_a_vision_connection(
    oai: openai.AsyncOpenAI, client: httpx.AsyncClient, upstream: FakeUpstream
) -> None:
    r = await client.get("/v1/connections")
    up = next(c for c in r.json()["connections"] if c["name"] == "up")
    assert (await client.patch(f"/v1/connections/{up['id']}", json={"vision": True})
            ).status_code == 200
    await oai.chat.completions.create(model="@up", messages=[{"role": "user", "content": [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": PIXEL}}]}])
    last = sent_messages(upstream)[-1]
    assert last["role"] == "user"
    assert {"type": "image_url", "image_url": {"url": PIXEL}} in last["content"]
    assert {"type": "text", "text": "What is this?"} in last["content"]


async def test_r14_0_a_character_name_alone_talks_on_the_default_connection(
    oai: openai.AsyncOpenAI, client: httpx.AsyncClient, upstream: FakeUpstream
) -> None:
    await add_character(client, "Orla")
    done = await oai.chat.completions.create(model="orla", messages=[
        {"role": "user", "content": "Hi"}])
    assert upstream.generation_requests == []  # unset: the built-in mock answers
    assert done.choices[0].message.content
    r = await client.get("/v1/connections")
    up = next(c for c in r.json()["connections"] if c["name"] == "up")
    r = await client.patch("/v1/settings", json={"default_connection_id": up["id"]})
    assert r.status_code == 200, r.text
    upstream.script.reply("From the default connection.")
    done = await oai.chat.completions.create(model="Orla", messages=[
        {"role": "user", "content": "Hello again"}])
    assert done.choices[0].message.content == "From the default connection."
    assert len(upstream.generation_requests) == 1


async def test_r14_1_a_paced_stream_takes_the_fast_lane_chunk_by_chunk(
    oai: openai.AsyncOpenAI, client: httpx.AsyncClient, upstream: FakeUpstream
) -> None:
    words = " ".join(f"w{i}" for i in range(40))
    upstream.script.reply(words, token_delay=0.005)
    chunks, tour = await _streamed_with_tour(oai, client)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == words
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert len({c.id for c in chunks}) == 1  # every chunk, the fast lane's too, of one completion
    assert tour["diagnostics"]["fast_lane_deltas"] >= 20


async def _streamed_with_tour(oai: openai.AsyncOpenAI, client: httpx.AsyncClient
                              ) -> tuple[list[Any], dict[str, Any]]:
    """A streamed completion's chunks as the SDK parses them, and its tour's record."""
    async with oai.chat.completions.with_streaming_response.create(
            model="@up", messages=[{"role": "user", "content": "Count."}],
            stream=True) as response:
        chunks = [c async for c in await response.parse()]
        tour_id = response.headers["x-evacore-tour"]
    return chunks, (await client.get(f"/v1/tours/{tour_id}")).json()


async def test_r14_1_a_first_token_that_comes_alone_takes_the_lane_and_opens_the_stream(
    oai: openai.AsyncOpenAI, client: httpx.AsyncClient, upstream: FakeUpstream
) -> None:
    # the upstream's head at once, its first token later: the first word opens the response
    # from the network read itself, its head and the word in one write (until it comes a
    # failure is still a plain HTTP error); every later one is written from the read too; the
    # client sees the role chunk first and every word in order
    upstream.script.reply("Seven gulls sat on the wall.", first_token_delay=0.15,
                          token_delay=0.05)
    chunks, tour = await _streamed_with_tour(oai, client)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].delta.content for c in chunks[1:-1]] == [
        "Seven ", "gulls ", "sat ", "on ", "the ", "wall."]
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert tour["diagnostics"]["fast_lane_deltas"] == 6  # the tour's task woke for none
