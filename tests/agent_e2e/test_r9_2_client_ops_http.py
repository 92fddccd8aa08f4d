"""R9.2, R8.4 over HTTP: declared client ops become tools, a call reaches the client as a
`client_op` event, the client's answer (POST /v1/tours/{id}/client-ops/{call_id}) becomes
the tool result once, and an unanswered call times out while the tour goes on."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.agent_e2e._tours import (
    as_user,
    named,
    run_tour,
    scripted_chat,
    sse_events,
    stored_variant,
)
from tests.conftest import make_user

OPS = [{"name": "run", "description": "Run a command on my laptop.",
        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}},
                       "required": ["cmd"]}}]
SCRIPT = [
    {"step": 0, "tool_calls": [{"name": "client_run", "arguments": {"cmd": "ls"}},
                               {"name": "client_run", "arguments": {"cmd": "rm -rf /"}}]},
    {"step": 1, "text": "The client answered."},
]


async def test_r9_2_client_op_round_trip_over_http(live: httpx.AsyncClient) -> None:
    chat = await scripted_chat(live, SCRIPT)
    events: list[tuple[str, dict[str, Any]]] = []
    posts: list[tuple[str, int]] = []
    async with live.stream("POST", f"/v1/chats/{chat}/generate",
                           json={"message": {"content": "list my files"},
                                 "client_ops": OPS}) as r:
        assert r.status_code == 200
        async for name, data in sse_events(r):
            events.append((name, data))
            if name != "client_op":
                continue
            url = f"/v1/tours/{data['tour_id']}/client-ops/{data['call_id']}"
            answer = ({"content": "ok from client"} if data["arguments"]["cmd"] == "ls"
                      else {"content": "denied by the user", "error": True})
            posts.append(("first", (await live.post(url, json=answer)).status_code))
            posts.append(("again", (await live.post(url, json=answer)).status_code))
    tour_id = events[0][1]["tour_id"]
    ops = named(events, "client_op")
    assert [(o["id"], o["call_id"], o["name"], o["arguments"]) for o in ops] == [
        ("call_0_0", "call_0_0", "run", {"cmd": "ls"}),
        ("call_0_1", "call_0_1", "run", {"cmd": "rm -rf /"}),
    ]
    assert all(o["tour_id"] == tour_id for o in ops)
    assert posts == [("first", 200), ("again", 409)] * 2
    results = {r["id"]: r["content"] for r in named(events, "tool_result")}
    assert results == {"call_0_0": "ok from client", "call_0_1": "error: denied by the user"}
    names = [n for n, _ in events]
    assert names.index("client_op") > names.index("tool_call")
    assert named(events, "message")[0]["content"] == "The client answered."
    [step] = (await stored_variant(live, chat))["steps"]
    assert [json.loads(c["arguments"]) for c in step["tool_calls"]] == [{"cmd": "ls"},
                                                                      {"cmd": "rm -rf /"}]
    assert {r["id"]: r["content"] for r in step["results"]} == results

    never_sent = await live.post(f"/v1/tours/{tour_id}/client-ops/call_9_9", json={})
    assert never_sent.status_code == 404
    assert never_sent.json()["error"]["code"] == "not_found"
    no_tour = await live.post("/v1/tours/nosuchtour/client-ops/call_0_0", json={})
    assert no_tour.status_code == 404
    stranger = as_user(await make_user(live, "guest"))
    other = await live.post(f"/v1/tours/{tour_id}/client-ops/call_0_0", json={},
                            headers=stranger)
    assert other.status_code == 404


@pytest.mark.parametrize("agent_settings", [{"client_op_timeout": 0.3}], indirect=True)
async def test_r9_2_unanswered_client_op_times_out_and_the_tour_goes_on(
        client: httpx.AsyncClient) -> None:
    chat = await scripted_chat(client, [
        {"step": 0, "tool_calls": [{"name": "client_run", "arguments": {"cmd": "ls"}}]},
        {"step": 1, "text": "No answer came."},
    ])
    tour_id, events = await run_tour(client, chat, "list", client_ops=OPS)
    assert [o["call_id"] for o in named(events, "client_op")] == ["call_0_0"]
    [result] = named(events, "tool_result")
    assert result["content"] == "error: the client did not answer within 0.3s"
    assert named(events, "message")[0]["content"] == "No answer came."
    [step] = (await stored_variant(client, chat))["steps"]
    assert step["results"][0]["content"] == result["content"]
    late = await client.post(f"/v1/tours/{tour_id}/client-ops/call_0_0",
                             json={"content": "too late"})
    assert late.status_code == 409
    assert late.json()["error"]["code"] == "conflict"


MALFORMED = {
    "schema-not-object": [{"name": "run", "parameters": {"type": "string"}}],
    "name-too-long": [{"name": "x" * 58}],
    "duplicate": [{"name": "run"}, {"name": "run"}],
    "unknown-field": [{"name": "run", "strict": True}],
    "bad-name": [{"name": "bad name"}],
}


async def test_r9_2_malformed_client_ops_are_422_before_the_tour_starts(
        client: httpx.AsyncClient) -> None:
    chat = await scripted_chat(client, [{"text": "never"}])
    for case, ops in MALFORMED.items():
        r = await client.post(f"/v1/chats/{chat}/generate",
                              json={"message": {"content": "hi"}, "client_ops": ops})
        assert r.status_code == 422, (case, r.text)
        assert r.json()["error"]["code"] in ("invalid_input", "validation_error"), case
    assert (await client.get(f"/v1/chats/{chat}/messages")).json()["messages"] == []


async def test_r9_2_only_the_master_may_declare_client_ops(client: httpx.AsyncClient) -> None:
    for role in ("guest", "trusted"):
        headers = as_user(await make_user(client, role))
        chat = await scripted_chat(client, [{"text": "never"}], headers)
        r = await client.post(f"/v1/chats/{chat}/generate", headers=headers,
                              json={"message": {"content": "hi"}, "client_ops": OPS})
        assert r.status_code == 403, (role, r.text)
        assert r.json()["error"]["code"] == "forbidden"
        assert "master" in r.json()["error"]["message"]
        assert (await client.get(f"/v1/chats/{chat}/messages",
                                 headers=headers)).json()["messages"] == []
        # without client ops the same person's tour runs
        ok = await client.post(f"/v1/chats/{chat}/generate", headers=headers,
                               json={"message": {"content": "hi"}, "stream": False})
        assert ok.status_code == 200, ok.text


async def test_r9_2_client_ops_without_a_stream_are_422(client: httpx.AsyncClient) -> None:
    chat = await scripted_chat(client, [{"text": "never"}])
    r = await client.post(f"/v1/chats/{chat}/generate",
                          json={"message": {"content": "hi"}, "client_ops": OPS,
                                "stream": False})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["code"] == "invalid_input"
    assert "stream" in r.json()["error"]["message"]
    assert (await client.get(f"/v1/chats/{chat}/messages")).json()["messages"] == []
