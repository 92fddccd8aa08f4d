"""R2.5 / R5.2 memory tools: the model appends to, replaces in and rewrites memory blocks of
its own chat; read-only blocks, limits, other chats' blocks and roles without the right get
a clear `error: …` result and nothing changes. Directly and through real tours."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from evacore.agent.registry import ToolContext, ToolPolicy, run_tool
from evacore.core import Core
from evacore.store.tables import Character
from tests.conftest import make_user
from tests.memory.helpers import say, scripted_chat, sent_messages


async def _block(client: httpx.AsyncClient, **body: Any) -> str:
    r = await client.post("/v1/memory", json=body)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def _content(client: httpx.AsyncClient, block_id: str) -> str:
    return str((await client.get(f"/v1/memory/{block_id}")).json()["content"])


async def _call(core: Core, chat_id: str, name: str, role: str = "master",
                policy: ToolPolicy | None = None, **args: Any) -> str:
    ctx = ToolContext(workspace=core.settings.workspace_dir, role=role, env=frozenset(),
                      abort=asyncio.Event(), chat_id=chat_id, services={"core": core},
                      policy=policy or ToolPolicy())
    outcome = await run_tool(core.tools, name, json.dumps(args), ctx)
    return outcome.output


async def test_r2_5_memory_tools_edit_writable_blocks(client: httpx.AsyncClient,
                                                      core: Core) -> None:
    chat_id = await scripted_chat(client, [{"text": "ok"}])
    notes = await _block(client, chat_id=chat_id, label="notes", content="Name: Ada.")
    out = await _call(core, chat_id, "memory_append", label="notes", text="Likes tea.")
    assert "saved" in out and not out.startswith("error")
    assert await _content(client, notes) == "Name: Ada.\nLikes tea."
    await _call(core, chat_id, "memory_replace", label="notes", old="tea", new="green tea")
    assert await _content(client, notes) == "Name: Ada.\nLikes green tea."
    await _call(core, chat_id, "memory_rethink", label=notes, content="Ada, tea drinker.")
    assert await _content(client, notes) == "Ada, tea drinker."


async def test_r2_5_memory_tools_refuse_with_a_clear_error(client: httpx.AsyncClient,
                                                           core: Core) -> None:
    async with core.session() as s:
        mira = Character(name="Mira", data={"name": "Mira"})
        s.add(mira)
        await s.flush()
        mira_id = mira.id
    chat_id = await scripted_chat(client, [{"text": "ok"}], character_id=mira_id)
    other_chat = await scripted_chat(client, [{"text": "ok"}])
    fixed = await _block(client, character_id=mira_id, label="canon", content="Mira is 30.",
                         read_only=True)
    small = await _block(client, chat_id=chat_id, label="small", content="abc", limit=10)
    foreign = await _block(client, chat_id=other_chat, label="secret", content="x")

    cases = [
        ({"name": "memory_append", "label": "canon", "text": "Mira is 31."}, "is read-only"),
        ({"name": "memory_rethink", "label": "canon", "content": ""}, "is read-only"),
        ({"name": "memory_append", "label": "small", "text": "more than ten"}, "over its limit of 10"),
        ({"name": "memory_replace", "label": "small", "old": "zzz", "new": "y"}, "was not found"),
        ({"name": "memory_append", "label": foreign, "text": "y"}, "does not belong to this chat"),
        ({"name": "memory_append", "label": "secret", "text": "y"}, "no memory block labelled"),
        ({"name": "memory_append", "label": "small", "text": "y", "role": "guest"}, "unknown tool"),
        ({"name": "memory_append", "label": "small", "text": "y", "role": "guest",
              "policy": ToolPolicy.from_dict({"guest": {"allow": ["kind:memory"]}})},
         "the guest role may not edit memory"),
        ({"name": "memory_append", "label": "small", "text": "y", "role": "trusted",
              "policy": ToolPolicy.from_dict({"trusted": {"deny": ["kind:memory"]}})},
         "unknown tool"),
    ]
    for args, expected in cases:
        out = await _call(core, chat_id, **args)
        assert out.startswith("error: ") and expected in out, (args, out)
    assert await _content(client, fixed) == "Mira is 30."
    assert await _content(client, small) == "abc"
    assert await _content(client, foreign) == "x"
    # a trusted user may edit by default
    out = await _call(core, chat_id, "memory_append", role="trusted", label="small", text="d")
    assert not out.startswith("error") and await _content(client, small) == "abc\nd"


APPEND = {"name": "memory_append", "arguments": {"label": "notes", "text": "Likes green tea."}}
SCRIPT = [{"step": 0, "tool_calls": [APPEND]}, {"step": 1, "text": "Noted."}]


async def test_r2_5_model_edits_memory_in_a_tour_and_sees_it_next_turn(
    client: httpx.AsyncClient,
) -> None:
    chat_id = await scripted_chat(client, SCRIPT)
    notes = await _block(client, chat_id=chat_id, label="notes", content="Name: Ada.")
    body = await say(client, chat_id, "I like green tea, remember that.")
    assert body["content"] == "Noted."
    result = body["steps"][0]["results"][0]["content"]
    assert result.startswith("memory block 'notes' saved")
    assert body["diagnostics"]["memory"]["edits"][0]["block"] == "notes"
    assert await _content(client, notes) == "Name: Ada.\nLikes green tea."
    later = await say(client, chat_id, "What do I like?")
    assert any("Name: Ada.\nLikes green tea." in str(m["content"]) for m in sent_messages(later))


async def test_r2_5_model_edit_of_a_read_only_block_is_refused_in_a_tour(
    client: httpx.AsyncClient,
) -> None:
    chat_id = await scripted_chat(client, SCRIPT)
    notes = await _block(client, chat_id=chat_id, label="notes", content="Fixed.",
                         read_only=True)
    body = await say(client, chat_id, "Remember my tea.")
    result = body["steps"][0]["results"][0]
    assert result["content"] == "error: memory block 'notes' is read-only"
    assert result["error"] is True
    assert await _content(client, notes) == "Fixed."


async def test_r2_5_guests_are_not_offered_memory_tools(client: httpx.AsyncClient) -> None:
    guest = {"Authorization": f"Bearer {await make_user(client, 'guest')}"}
    chat_id = await scripted_chat(client, SCRIPT, headers=guest)
    notes = await _block(client, chat_id=chat_id, label="notes", content="Untouched.")
    r = await client.post(f"/v1/chats/{chat_id}/generate", headers=guest,
                          json={"message": {"content": "Remember my tea."}, "stream": False})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["steps"][0]["results"][0]["content"].startswith("error: unknown tool")
    tour = (await client.get(f"/v1/tours/{body['tour_id']}")).json()
    assert not any(n.startswith("memory_") for n in tour["diagnostics"]["tools_offered"])
    master_tour = await say(client, await scripted_chat(client, [{"text": "ok"}]), "hi")
    assert "memory_append" in master_tour["diagnostics"]["tools_offered"]
    assert await _content(client, notes) == "Untouched."
