"""R12.3, R12.4: a chat on the built-in mock connection answers, streamed and not."""

from __future__ import annotations

import httpx

from tests.helpers import parse_sse


async def mock_connection(client: httpx.AsyncClient, **params) -> str:
    r = await client.post("/v1/connections", json={"name": "m", "kind": "mock", "params": params})
    assert r.status_code == 201, r.text
    return r.json()["id"]


async def test_r12_4_non_stream_generate_stores_user_and_answer(client: httpx.AsyncClient) -> None:
    chat = (await client.post("/v1/chats", json={})).json()
    r = await client.post(f"/v1/chats/{chat['id']}/generate",
                          json={"message": {"content": "hello there"}, "stream": False})
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) >= {"tour_id", "message_id", "variant_id", "content", "steps",
                         "finish_reason", "usage"}
    assert "hello there" in body["content"]
    msgs = (await client.get(f"/v1/chats/{chat['id']}/messages")).json()["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant"]
    assert msgs[1]["content"] == body["content"]
    assert msgs[1]["active_variant"] == body["variant_id"]
    tour = (await client.get(f"/v1/tours/{body['tour_id']}")).json()
    assert tour["status"] == "completed"
    stages = [c["stage"] for c in tour["diagnostics"]["changes"]]
    assert "character" in stages


async def test_r12_4_stream_generate_sends_typed_events(client: httpx.AsyncClient) -> None:
    conn = await mock_connection(client, script=[{"text": "one two three"}])
    chat = (await client.post("/v1/chats", json={"connection_id": conn})).json()
    r = await client.post(f"/v1/chats/{chat['id']}/generate",
                          json={"message": {"content": "hi"}, "stream": True})
    assert r.status_code == 200
    events = parse_sse(r.text)
    names = [n for n, _ in events]
    assert names[0] == "tour" and names[-2:] == ["message", "done"]
    text = "".join(d["text"] for n, d in events if n == "delta")
    assert text == "one two three"
    msg = dict(events)["message"]
    assert msg["content"] == "one two three" and msg["message_id"] and msg["variant_id"]


async def test_r8_a_message_past_its_limit_is_413_naming_the_limit(
        client: httpx.AsyncClient) -> None:
    chat = (await client.post("/v1/chats", json={})).json()["id"]
    long = "x" * 1_000_001
    for url, body in ((f"/v1/chats/{chat}/generate", {"message": {"content": long}}),
                      (f"/v1/chats/{chat}/messages", {"role": "user", "content": long})):
        r = await client.post(url, json=body)
        assert r.status_code == 413, r.text
        assert r.json()["error"]["code"] == "too_large"
        assert r.json()["error"]["details"]["limit"] == 1_000_000
    assert (await client.get(f"/v1/chats/{chat}/messages")).json()["messages"] == []
