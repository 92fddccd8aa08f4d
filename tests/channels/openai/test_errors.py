"""R14.1 errors: OpenAI's envelope `{"error": {"message", "type", "param", "code"}}` on the
facade's routes for every failure (401, 404 model, 400 n > 1, malformed bodies, 502 from the
upstream), never FastAPI's `{"detail"}` nor evacore's own shape; unknown fields ignored."""

from __future__ import annotations

import asyncio

import httpx
import openai
import pytest
from fastapi import FastAPI

from evacore.core import Core
from tests.channels.openai.conftest import add_character, sdk
from tests.conftest import MASTER_TOKEN
from tests.fakes.script import Reply
from tests.fakes.upstream import FakeUpstream

HI = [{"role": "user", "content": "Hi"}]


def envelope(r: httpx.Response) -> dict:
    body = r.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"message", "type", "param", "code"}, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return body["error"]


@pytest.fixture
async def raw(app: FastAPI):
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://evacore.test",
                                 headers={"Authorization": f"Bearer {MASTER_TOKEN}"}) as c:
        yield c


async def test_r14_1_unknown_model_is_not_found_model_not_found(
    oai: openai.AsyncOpenAI, upstream: FakeUpstream
) -> None:
    for model in ("nobody", "nobody@up", "@nowhere", "Assistant"):
        with pytest.raises(openai.NotFoundError) as info:
            await oai.chat.completions.create(model=model, messages=HI)
        assert info.value.code == "model_not_found" and info.value.param == "model"
        assert info.value.status_code == 404
    assert upstream.generation_requests == []


async def test_r14_1_model_names_match_case_insensitively(
    oai: openai.AsyncOpenAI, client: httpx.AsyncClient, upstream: FakeUpstream
) -> None:
    from tests.channels.openai.conftest import add_character, sent_messages

    await add_character(client, "Élodie", system_prompt="I am {{char}}.")
    await oai.chat.completions.create(model="éLODIE@UP", messages=HI)
    assert sent_messages(upstream)[0]["content"] == "I am Élodie."
    done = await oai.chat.completions.create(model="@MOCK", messages=HI)
    assert done.choices[0].message.content  # the mock connection answers offline


async def test_r14_1_bad_token_is_authentication_error(app: FastAPI, raw: httpx.AsyncClient,
                                                       upstream: FakeUpstream) -> None:
    async with sdk(app, token="evc_not_a_token") as bad:
        with pytest.raises(openai.AuthenticationError) as info:
            await bad.chat.completions.create(model="@up", messages=HI)
        assert info.value.status_code == 401
        with pytest.raises(openai.AuthenticationError):
            await bad.models.list()
    for path, method in (("/v1/models", "GET"), ("/v1/chat/completions", "POST")):
        r = await raw.request(method, path, headers={"Authorization": ""}, json={})
        assert r.status_code == 401
        assert envelope(r)["type"] == "authentication_error"
    assert upstream.generation_requests == []


async def test_r14_1_n_above_one_is_refused(oai: openai.AsyncOpenAI,
                                            upstream: FakeUpstream) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        await oai.chat.completions.create(model="@up", messages=HI, n=2)
    assert info.value.status_code == 400 and info.value.param == "n"
    done = await oai.chat.completions.create(model="@up", messages=HI, n=1)
    assert len(done.choices) == 1


async def test_r14_1_malformed_bodies_get_the_envelope(raw: httpx.AsyncClient,
                                                       upstream: FakeUpstream) -> None:
    cases = [
        b"{not json", b"[]", b'{"messages": []}', b'{"model": "@up"}',
        b'{"model": "@up", "messages": [{"role": "wizard", "content": "x"}]}',
        b'{"model": "@up", "messages": [{"role": "assistant", "content": "x"}]}',
        b'{"model": "@up", "messages": [{"role": "tool", "content": "x", "tool_call_id": "c"}]}',
        b'{"model": "@up", "messages": [{"role": "user", "content": "x"}], "temperature": 9}',
        b'{"model": "@up", "messages": [{"role": "user", "content": 5}]}',
        b'{"model": "@up", "messages": [{"role": "user", "content": "x"}], "tools": [{"x": 1}]}',
    ]
    for body in cases:
        r = await raw.post("/v1/chat/completions", content=body,
                           headers={"content-type": "application/json"})
        assert r.status_code == 400, (body, r.text)
        assert "detail" not in r.text
        assert envelope(r)["type"] == "invalid_request_error"
    r = await raw.post("/v1/chat/completions", content=b'{"model": "@up"}')
    assert envelope(r)["param"] == "messages"
    r = await raw.get("/v1/chat/completions")
    assert r.status_code == 405 and envelope(r)
    assert upstream.generation_requests == []


async def test_r14_1_unknown_fields_are_ignored(raw: httpx.AsyncClient,
                                                upstream: FakeUpstream) -> None:
    upstream.script.reply("Fine.")
    r = await raw.post("/v1/chat/completions", json={
        "model": "@up", "messages": [{"role": "user", "content": "x", "name": "bob",
                                      "weird": [1]}],
        "logprobs": True, "top_logprobs": 3, "response_format": {"type": "text"},
        "parallel_tool_calls": False, "service_tier": "auto", "store": False,
        "metadata": {"a": "b"}, "modalities": ["text"], "something_new": {"x": 1}})
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == "Fine."


async def test_r14_1_upstream_500_is_502_with_the_envelope(oai: openai.AsyncOpenAI,
                                                           upstream: FakeUpstream) -> None:
    upstream.script.error(500, "the upstream broke")
    with pytest.raises(openai.APIStatusError) as info:
        await oai.chat.completions.create(model="@up", messages=HI)
    assert info.value.status_code == 502
    assert info.value.response.headers["x-evacore-chat"]
    body = info.value.body
    assert isinstance(body, dict) and set(body) == {"message", "type", "param", "code"}
    # streamed: the failure comes before the first chunk, so it is the same HTTP error
    upstream.script.error(500, "the upstream broke again")
    with pytest.raises(openai.APIStatusError) as info:
        await oai.chat.completions.create(model="@up", messages=[
            {"role": "user", "content": "Other"}], stream=True)
    assert info.value.status_code == 502


async def test_r14_1_failure_mid_stream_is_one_error_line_then_done(
    oai: openai.AsyncOpenAI, app: FastAPI, upstream: FakeUpstream
) -> None:
    upstream.script.add(Reply(text="one two three four five", reset_after=2))
    stream = await oai.chat.completions.create(model="@up", messages=HI, stream=True)
    seen = []
    with pytest.raises(openai.APIError) as info:
        async for chunk in stream:
            seen.append(chunk.choices[0].delta.content or "")
    assert "".join(seen) == "one two "
    assert info.value.code  # evacore's code of the provider failure
    upstream.script.add(Reply(text="one two three four five", reset_after=2))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://evacore.test") as c:
        r = await c.post("/v1/chat/completions", headers={
            "Authorization": f"Bearer {MASTER_TOKEN}"}, json={
            "model": "@up", "stream": True, "messages": [{"role": "user", "content": "Again"}]})
    lines = [line for line in r.text.split("\n") if line]
    assert r.status_code == 200
    assert lines[-1] == "data: [DONE]" and lines[-2].startswith('data: {"error":')
    assert sum(1 for line in lines if '"error"' in line) == 1



async def test_r14_1_a_non_stream_answer_aborted_twice_is_an_error_in_openai_terms(
    core: Core, raw: httpx.AsyncClient, upstream: FakeUpstream
) -> None:
    """A stop pressed twice while a non-stream answer is generated: the second abort must not
    cut the tour's own save short (the answer was a bare 500 before)."""
    upstream.script.add(Reply(text=" ".join(f"w{i}" for i in range(200)), token_delay=0.02))
    asked = asyncio.ensure_future(raw.post("/v1/chat/completions", json={
        "model": "@up", "messages": [{"role": "user", "content": "Count."}]}))
    for _ in range(250):
        if upstream.generation_requests and core.tours.running:
            break
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.1)  # some tokens in
    (tour_id,) = list(core.tours.running)
    assert core.tours.abort_local(tour_id, "aborted")
    await asyncio.sleep(0)  # the tour is in its abort's save now
    await asyncio.sleep(0)
    assert core.tours.abort_local(tour_id, "aborted")
    r = await asked
    assert envelope(r)["code"] == "aborted"
    assert r.headers["x-evacore-tour"] == tour_id
    tour = (await raw.get(f"/v1/tours/{tour_id}")).json()
    assert tour["status"] == "aborted"


async def test_r14_1_a_request_the_tour_refuses_leaves_no_chat_behind(
    raw: httpx.AsyncClient, client: httpx.AsyncClient, upstream: FakeUpstream
) -> None:
    before = (await client.get("/v1/chats")).json()
    for messages in (
        [{"role": "user", "content": "earlier"}, {"role": "assistant", "content": "ok"},
         {"role": "user", "content": ""}],
        [{"role": "user", "content": "earlier"}, {"role": "assistant", "content": "ok"},
         {"role": "user", "content": [{"type": "image_url", "image_url": {
             "url": "data:text/plain;base64,aGVsbG8="}}]}],
    ):
        r = await raw.post("/v1/chat/completions", json={"model": "@up", "messages": messages})
        assert r.status_code == 400, r.text
        assert envelope(r)["code"] == "invalid_input"
        assert "x-evacore-chat" not in r.headers
    assert (await client.get("/v1/chats")).json() == before  # retries pile up nothing
    assert upstream.generation_requests == []


async def test_r14_1_other_methods_and_one_model(oai: openai.AsyncOpenAI, raw: httpx.AsyncClient,
                                                 client: httpx.AsyncClient,
                                                 upstream: FakeUpstream) -> None:
    for path in ("/v1/chat/completions", "/v1/models"):
        r = await raw.options(path)
        assert r.status_code == 405 and envelope(r)["code"] == "method_not_allowed"
        assert (await raw.head(path)).status_code == 405
    await add_character(client, "Orla")
    for name in ("Orla", "orla@UP", "@up"):
        found = await oai.models.retrieve(name)
        assert (found.id, found.object, found.owned_by) == (name, "model", "evacore")
    with pytest.raises(openai.NotFoundError) as missing:
        await oai.models.retrieve("Nobody")
    assert missing.value.code == "model_not_found"
