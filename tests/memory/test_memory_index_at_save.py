"""What a tour's save puts in the retrieval index: its input and its answer, each a chunk
with its own fields (written together in one statement), the messages indexed already left
as they are, and a recent message edited since re-indexed with its new text (R2.5)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import httpx
from sqlalchemy import select

from evacore.core import Core
from evacore.memory.index import message_key
from evacore.memory.schema import chunks, text_hash
from tests.memory.helpers import say, scripted_chat


async def _chunks(core: Core, chat_id: str) -> list[dict[str, Any]]:
    async with core.session() as s:
        rows = (await s.execute(select(chunks).where(chunks.c.chat_id == chat_id)
                                .order_by(chunks.c.position, chunks.c.id))).all()
    return [dict(r._mapping) for r in rows]


async def test_a_tour_s_input_and_answer_are_indexed_each_with_its_own_fields(
    client: httpx.AsyncClient, core: Core
) -> None:
    chat_id = await scripted_chat(client, [{"text": "The lighthouse keeper was Agnes."}])
    first = await say(client, chat_id, "Who kept the lighthouse in 1911?")
    rows = await _chunks(core, chat_id)
    assert [(r["text"], r["part"], r["source_kind"]) for r in rows] == [
        ("Who kept the lighthouse in 1911?", 0, "message"),
        ("The lighthouse keeper was Agnes.", 0, "message")]
    user, answer = rows
    assert answer["message_id"] == first["message_id"]
    assert user["message_id"] != answer["message_id"]
    assert user["position"] + 1 == answer["position"]
    assert user["label"] != answer["label"] and answer["label"]  # each its own name or role
    assert {r["scope_key"] for r in rows} == {message_key(chat_id)}
    assert [r["n_terms"] for r in rows] == [6, 5]
    assert [r["text_hash"] for r in rows] == [text_hash(r["text"]) for r in rows]
    assert all(isinstance(r["created_at"], datetime) for r in rows)

    await say(client, chat_id, "And the cat?")
    again = await _chunks(core, chat_id)
    assert again[:2] == rows  # indexed already: left as they were
    assert [r["text"] for r in again[2:]] == ["And the cat?", "The lighthouse keeper was Agnes."]
    assert again[3]["message_id"] not in {r["message_id"] for r in rows}


async def test_a_recent_message_edited_since_is_indexed_again_with_its_new_text(
    client: httpx.AsyncClient, core: Core
) -> None:
    chat_id = await scripted_chat(client, [{"text": "Noted: the code is 1234."}])
    first = await say(client, chat_id, "Remember the code.")
    r = await client.patch(f"/v1/chats/{chat_id}/messages/{first['message_id']}",
                           json={"content": "Noted: the code is 9876."})
    assert r.status_code == 200, r.text
    await say(client, chat_id, "Thanks.")
    texts = [row["text"] for row in await _chunks(core, chat_id)
             if row["message_id"] == first["message_id"]]
    assert texts == ["Noted: the code is 9876."]
