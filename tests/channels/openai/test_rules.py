"""R14.1 with stream rules: a hard rule's discarded answer never reaches an OpenAI client,
streamed or not; the kept retry is what it gets and what the chat stores."""

from __future__ import annotations

import httpx
import openai
import orjson
import pytest
from fastapi import FastAPI

from evacore.core import Core
from tests.channels.openai.conftest import messages
from tests.conftest import MASTER_TOKEN
from tests.fakes.upstream import FakeUpstream
from tests.rules_integration.helpers import add_rule, clear_rules, fired

HARD = {"name": "hard_probe", "scope": "text", "condition": "FORBIDDEN",
        "text": "HARD INTERRUPT: never say that word."}
DISCARDED = "FORBIDDEN draft nobody may see"
KEPT = "Clean words here"


def answer_text(r: httpx.Response, stream: bool) -> str:
    if not stream:
        return r.json()["choices"][0]["message"]["content"]
    chunks = [orjson.loads(line[6:]) for line in r.text.split("\n")
              if line.startswith("data: {")]
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks
                   if c["choices"])


@pytest.fixture
async def hard_rule(client: httpx.AsyncClient, core: Core) -> None:
    await clear_rules(core)
    await add_rule(client, **HARD)


@pytest.mark.parametrize("stream", [True, False])
async def test_r14_1_a_hard_rules_discarded_answer_never_reaches_the_client(
    app: FastAPI, client: httpx.AsyncClient, upstream: FakeUpstream, hard_rule: None,
    stream: bool
) -> None:
    upstream.script.reply(DISCARDED).reply(KEPT)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://evacore.test",
                                 headers={"Authorization": f"Bearer {MASTER_TOKEN}"}) as raw:
        r = await raw.post("/v1/chat/completions", json={
            "model": "@up", "stream": stream, "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": "Say something."}]} if stream else {
            "model": "@up", "messages": [{"role": "user", "content": "Say something."}]})
    assert r.status_code == 200, r.text
    for secret in ("FORBIDDEN", "nobody may see", "HARD INTERRUPT", "system-interrupt"):
        assert secret not in r.text
    assert answer_text(r, stream) == KEPT
    assert len(upstream.generation_requests) == 2  # the discarded answer was retried
    assert "HARD INTERRUPT" in str(upstream.generation_requests[1].json["messages"][-1])
    stored = await messages(client, r.headers["x-evacore-chat"])
    assert stored[-1]["content"] == KEPT and "FORBIDDEN" not in str(stored)
    assert (await fired(client))["hard_probe"] == (1, 1)


async def test_r14_1_the_sdk_stream_shows_only_the_kept_answer(
    oai: openai.AsyncOpenAI, upstream: FakeUpstream, hard_rule: None
) -> None:
    upstream.script.reply(DISCARDED).reply(KEPT)
    raw = await oai.chat.completions.with_raw_response.create(
        model="@up", messages=[{"role": "user", "content": "Again."}], stream=True)
    first_chat = raw.headers["x-evacore-chat"]
    stream = raw.parse()
    text = "".join([c.choices[0].delta.content or "" async for c in stream])
    assert text == KEPT
    # what the client got is what its chat is found by: the discarded draft is not
    upstream.script.reply("Glad to hear.")
    raw = await oai.chat.completions.with_raw_response.create(model="@up", messages=[
        {"role": "user", "content": "Again."}, {"role": "assistant", "content": KEPT},
        {"role": "user", "content": "Good."}])
    assert raw.parse().choices[0].message.content == "Glad to hear."
    assert raw.headers["x-evacore-chat"] == first_chat
