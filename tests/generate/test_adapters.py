"""R2.10, R12.4: each adapter answers through `POST /v1/chats/{id}/generate` against its
loopback fake, streamed and not; chat adapters run a built-in tool between two steps."""

from __future__ import annotations

import json

import httpx
import pytest

from evacore.core import Core
from tests.fakes.upstream import FakeUpstream
from tests.generate.helpers import (
    deltas,
    fake_connection,
    generate,
    messages,
    names,
    new_chat,
    one,
    stream,
    tour_of,
    variant,
)

ANSWER = "The river runs north today."
KINDS = ("openai-chat", "anthropic", "openai-text", "kobold")
PATHS = {
    "openai-chat": "/v1/chat/completions", "anthropic": "/v1/messages",
    "openai-text": "/v1/completions", "kobold": "/api/extra/generate/stream",
}


@pytest.fixture(params=KINDS)
def fake(request: pytest.FixtureRequest) -> FakeUpstream:
    """The fake upstream of each adapter kind in turn."""
    fixture = {"openai-chat": "openai_fake", "anthropic": "anthropic_fake",
               "openai-text": "openai_text_fake", "kobold": "kobold_fake"}[request.param]
    return request.getfixturevalue(fixture)


def _upstream_saw_input(fake: FakeUpstream, text: str) -> bool:
    body = fake.last_body
    if fake.kind in ("openai-text", "kobold"):
        return text in body["prompt"]
    return text in json.dumps(body["messages"])


async def test_r2_10_every_adapter_answers_through_generate_streamed_and_not(
    client: httpx.AsyncClient, fake: FakeUpstream
) -> None:
    chat = await new_chat(client, await fake_connection(client, fake))
    fake.script.reply(ANSWER)
    events = await stream(client, chat, "Which way does the river run?")
    assert names(events)[0] == "tour" and names(events)[-2:] == ["message", "done"]
    assert len(deltas(events)) > 1  # word by word, not one block
    assert "".join(deltas(events)) == ANSWER
    assert [r.path for r in fake.generation_requests] == [PATHS[fake.kind]]
    assert _upstream_saw_input(fake, "Which way does the river run?")
    saved = one(events, "message")
    msgs = await messages(client, chat)
    assert [m["role"] for m in msgs] == ["user", "assistant"]
    assert msgs[1]["id"] == saved["message_id"] and msgs[1]["content"] == ANSWER
    v = variant(msgs[1])
    assert v["id"] == saved["variant_id"] and v["status"] == "complete"
    assert v["finish_reason"] == "stop" and v["tour_id"] == one(events, "tour")["tour_id"]
    done = one(events, "done")
    assert done["finish_reason"] == "stop" and "request" in done["timings"]

    # the same chat without streaming: one JSON object, the next turn stored
    fake.script.reply("And south tomorrow.")
    r = await generate(client, chat, "And tomorrow?", stream=False)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["content"] == "And south tomorrow." and body["finish_reason"] == "stop"
    assert body["steps"] == [] and body["message_id"] and body["variant_id"]
    assert _upstream_saw_input(fake, ANSWER)  # the first answer is history now
    msgs = await messages(client, chat)
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant"]
    assert msgs[-1]["content"] == body["content"]
    assert msgs[-1]["active_variant"] == body["variant_id"]
    tour = await tour_of(client, body["tour_id"])
    assert tour["status"] == "completed" and tour["variant_id"] == body["variant_id"]


@pytest.mark.parametrize("kind", ["openai-chat", "anthropic"])
async def test_r2_10_chat_adapters_run_a_tool_between_steps(
    client: httpx.AsyncClient, core: Core, kind: str, request: pytest.FixtureRequest,
) -> None:
    fake: FakeUpstream = request.getfixturevalue(
        "openai_fake" if kind == "openai-chat" else "anthropic_fake")
    workspace = core.settings.workspace_dir
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "harbour-notes.txt").write_text("tide tables\n")
    chat = await new_chat(client, await fake_connection(client, fake))
    for turn, streamed in enumerate((True, False)):
        call_id = f"call_ls_{turn}"
        fake.script.tool_call("list_dir", {"path": "."}, id=call_id, text="Let me look.")
        fake.script.reply("There is one file: harbour-notes.txt.")
        if streamed:
            events = await stream(client, chat, "What is in the workspace?")
            order = names(events)
            assert order.index("tool_call") < order.index("tool_result") < order.index("message")
            call = one(events, "tool_call")
            assert call["id"] == call_id and call["name"] == "list_dir"
            assert json.loads(call["arguments"]) == {"path": "."}
            assert "harbour-notes.txt" in one(events, "tool_result")["content"]
            assert "".join(deltas(events)) == "Let me look.There is one file: harbour-notes.txt."
            content = one(events, "message")["content"]
        else:
            r = await generate(client, chat, "And now?", stream=False)
            assert r.status_code == 200, r.text
            content = r.json()["content"]
            [step] = r.json()["steps"]
            assert step["tool_calls"][0]["name"] == "list_dir"
            assert "harbour-notes.txt" in step["results"][0]["content"]
        assert content == "There is one file: harbour-notes.txt."

        first, second = fake.bodies()[-2:]
        assert any(t.get("name", t.get("function", {}).get("name")) == "list_dir"
                   for t in first["tools"])
        sent = json.dumps(second["messages"])
        assert "harbour-notes.txt" in sent and call_id in sent  # the result went upstream
        last = second["messages"][-1]
        if kind == "openai-chat":
            assert last["role"] == "tool" and last["tool_call_id"] == call_id
        else:
            assert last["role"] == "user" and last["content"][-1]["type"] == "tool_result"
            assert last["content"][-1]["tool_use_id"] == call_id

        v = variant((await messages(client, chat))[-1])
        assert v["content"] == content
        [step] = v["steps"]
        assert step["tool_calls"][0]["id"] == call_id and step["results"][0]["id"] == call_id
        assert "harbour-notes.txt" in step["results"][0]["content"]
    assert len(fake.generation_requests) == 4
