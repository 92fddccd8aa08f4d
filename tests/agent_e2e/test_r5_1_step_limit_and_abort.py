"""R5.1, R5.4: a model that calls tools forever stops at `agent.max_steps` (finish reason
`max_steps`, stored); a call cut off by an abort is stored without a result and later
tours still replay it with a result, as providers require."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from evacore.pipeline.stages.character import UNANSWERED
from tests.agent_e2e._tours import (
    as_user,
    named,
    run_tour,
    scripted_chat,
    sse_events,
    stored_variant,
    tool_messages,
    tour_of,
    upstream_bodies,
)
from tests.conftest import make_user

FOREVER = [{"match": "loop", "text": "Once more.",
            "tool_calls": [{"name": "list_dir", "arguments": {}}]}]


@pytest.fixture
def agent_settings() -> dict[str, Any]:
    return {"max_steps": 3}


async def test_r5_1_tools_forever_stop_at_max_steps(client: httpx.AsyncClient) -> None:
    chat = await scripted_chat(client, FOREVER)
    tour_id, events = await run_tour(client, chat, "loop forever")
    assert len(named(events, "tool_call")) == len(named(events, "tool_result")) == 3
    assert named(events, "done")[0]["finish_reason"] == "max_steps"
    assert named(events, "message")[0]["content"] == ""
    variant = await stored_variant(client, chat)
    assert variant["finish_reason"] == "max_steps"
    assert len(variant["steps"]) == 3
    assert all(s["results"][0]["content"] == "" for s in variant["steps"])  # empty workspace
    tour = await tour_of(client, tour_id)
    assert tour["status"] == "completed"
    assert "step limit (3)" in tour["diagnostics"]["stopped"]
    assert len(await upstream_bodies(client, tour_id)) == 3


async def test_r5_1_a_request_may_lower_the_step_limit_but_never_raise_it(
        client: httpx.AsyncClient) -> None:
    guest = as_user(await make_user(client, "guest"))
    chat = await scripted_chat(client, FOREVER, guest)
    for asked, steps in ((50, 3), (2, 2)):
        _, events = await run_tour(client, chat, "loop forever", guest,
                                   params={"max_steps": asked})
        assert len(named(events, "tool_call")) == steps, asked
        assert named(events, "done")[0]["finish_reason"] == "max_steps"
    for bad in ("abc", 0, -1, 2.5, True):
        r = await client.post(f"/v1/chats/{chat}/generate", headers=guest,
                              json={"message": {"content": "loop"}, "params": {"max_steps": bad}})
        assert r.status_code == 422, (bad, r.text)


async def test_r5_4_a_call_cut_off_by_abort_is_replayed_with_a_result(
        live: httpx.AsyncClient) -> None:
    chat = await scripted_chat(live, [
        {"match": "wait", "step": 0,
         "tool_calls": [{"name": "shell", "arguments": {"command": "sleep 30"}}]},
        {"match": "again", "text": "Back."},
    ])
    events: list[tuple[str, dict[str, Any]]] = []
    async with live.stream("POST", f"/v1/chats/{chat}/generate",
                           json={"message": {"content": "wait a bit"}}) as r:
        async for name, data in sse_events(r):
            events.append((name, data))
            if name == "tool_call":
                tour_id = events[0][1]["tour_id"]
                assert (await live.post(f"/v1/tours/{tour_id}/abort")).status_code == 200
    assert events[-1][0] == "error" and not named(events, "tool_result")
    aborted = await stored_variant(live, chat)
    assert aborted["status"] == "aborted"
    [step] = aborted["steps"]
    assert [c["id"] for c in step["tool_calls"]] == ["call_0_0"] and step["results"] == []

    next_id, events = await run_tour(live, chat, "again")
    assert named(events, "message")[0]["content"] == "Back."
    [body] = await upstream_bodies(live, next_id)
    assert tool_messages(body) == {"call_0_0": UNANSWERED}
    roles = [m["role"] for m in body["messages"]]
    assert roles[roles.index("tool") - 1] == "assistant"
