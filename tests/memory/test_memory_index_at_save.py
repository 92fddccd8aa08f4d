"""What a tour's save puts in the retrieval index (R2.5). While every message of the chat is
in the prompt and no embedding backend waits for them, nothing: the index catches up when it
is searched (the memory search probe, retrieval's backfill), so the messages are found all the
same. Once messages have left the window, or with an embedding backend: the tour's input and
its answer, each a chunk with its own fields, the messages indexed already left as they are,
and a recent message edited since re-indexed with its new text."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import httpx
from sqlalchemy import select

from evacore.core import Core
from evacore.memory.embeddings import CachedBackend, OpenAIBackend
from evacore.memory.index import message_key
from evacore.memory.schema import chunks, text_hash
from tests.memory.corpus import long_chat
from tests.memory.helpers import add_messages, embeddings_endpoint, say, scripted_chat

ANSWER = "The lighthouse keeper was Agnes."
QUESTION = "Who kept the lighthouse in 1911?"


async def _chunks(core: Core, chat_id: str) -> list[dict[str, Any]]:
    async with core.session() as s:
        rows = (await s.execute(select(chunks).where(chunks.c.chat_id == chat_id)
                                .order_by(chunks.c.position, chunks.c.id))).all()
    return [dict(r._mapping) for r in rows]


async def _past_the_window(client: httpx.AsyncClient, core: Core, script: list[dict[str, Any]]
                           ) -> str:
    """A chat whose older messages no longer fit its context: retrieval searches them."""
    chat_id = await scripted_chat(client, script, context_size=1024, max_tokens=128)
    turns, _ = long_chat(60, facts=[])
    await add_messages(core, chat_id, turns)
    return chat_id


async def _search(client: httpx.AsyncClient, chat_id: str, query: str) -> list[str]:
    r = await client.post("/v1/memory/search", json={"chat_id": chat_id, "query": query})
    assert r.status_code == 200, r.text
    return [hit["text"] for hit in r.json()["results"]]


async def test_a_chat_held_whole_by_its_prompt_is_indexed_when_searched_not_at_save(
    client: httpx.AsyncClient, core: Core
) -> None:
    chat_id = await scripted_chat(client, [{"text": ANSWER}])
    body = await say(client, chat_id, QUESTION)
    assert "skipped" in body["diagnostics"]["memory"]["retrieval"]
    assert await _chunks(core, chat_id) == []  # nothing could search them yet

    assert (await _search(client, chat_id, "lighthouse keeper"))[0] == ANSWER
    rows = await _chunks(core, chat_id)
    assert [(r["text"], r["part"], r["source_kind"]) for r in rows] == [
        (QUESTION, 0, "message"), (ANSWER, 0, "message")]
    assert rows[1]["message_id"] == body["message_id"]
    assert [r["text_hash"] for r in rows] == [text_hash(r["text"]) for r in rows]
    assert await _search(client, chat_id, "lighthouse keeper")  # searched again: same rows
    assert await _chunks(core, chat_id) == rows


async def test_past_the_window_a_tour_s_input_and_answer_are_indexed_each_with_its_own_fields(
    client: httpx.AsyncClient, core: Core
) -> None:
    chat_id = await _past_the_window(client, core, [{"text": ANSWER}])
    first = await say(client, chat_id, QUESTION)
    report = first["diagnostics"]["memory"]["retrieval"]
    assert "skipped" not in report and report["backfilled"] >= 60
    rows = [r for r in await _chunks(core, chat_id) if r["position"] >= 60]
    assert [(r["text"], r["part"], r["source_kind"]) for r in rows] == [
        (QUESTION, 0, "message"), (ANSWER, 0, "message")]
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
    again = [r for r in await _chunks(core, chat_id) if r["position"] >= 60]
    assert again[:2] == rows  # indexed already: left as they were
    assert [r["text"] for r in again[2:]] == ["And the cat?", ANSWER]
    assert again[3]["message_id"] not in {r["message_id"] for r in rows}


async def test_a_recent_message_edited_since_is_indexed_again_with_its_new_text(
    client: httpx.AsyncClient, core: Core
) -> None:
    chat_id = await _past_the_window(client, core, [{"text": "Noted: the code is 1234."}])
    first = await say(client, chat_id, "Remember the code.")
    r = await client.patch(f"/v1/chats/{chat_id}/messages/{first['message_id']}",
                           json={"content": "Noted: the code is 9876."})
    assert r.status_code == 200, r.text
    await say(client, chat_id, "Thanks.")
    texts = [row["text"] for row in await _chunks(core, chat_id)
             if row["message_id"] == first["message_id"]]
    assert texts == ["Noted: the code is 9876."]


async def test_with_an_embedding_backend_the_save_indexes_for_the_vectors(
    client: httpx.AsyncClient, core: Core
) -> None:
    seen: list[dict[str, Any]] = []
    core.memory.use_backend(CachedBackend(OpenAIBackend(
        "http://127.0.0.1:9/v1", "fake", transport=embeddings_endpoint(seen))))
    chat_id = await scripted_chat(client, [{"text": ANSWER}])
    await say(client, chat_id, QUESTION)
    assert [r["text"] for r in await _chunks(core, chat_id)] == [QUESTION, ANSWER]


async def test_a_recent_message_edited_after_the_window_grew_is_found_with_its_new_text(
    client: httpx.AsyncClient, core: Core
) -> None:
    """Retrieval's backfill went past the chat's newest messages; then the chat fit its
    prompt again (a larger context), one of them was edited and a tour saved without
    indexing: the search finds its new text the first time (the backfill starts again from
    the messages that save left out, as the save would have re-indexed them)."""
    chat_id = await _past_the_window(client, core, [{"text": "Noted."}])
    await say(client, chat_id, "Hello there.")
    await say(client, chat_id, "The spare key hangs by the blue door.")
    chat = (await client.get(f"/v1/chats/{chat_id}")).json()
    r = await client.patch(f"/v1/connections/{chat['connection_id']}",
                           json={"context_size": 65536})
    assert r.status_code == 200, r.text
    messages = (await client.get(f"/v1/chats/{chat_id}/messages")).json()["messages"]
    said = next(m for m in messages if m["content"].startswith("The spare key"))
    r = await client.patch(f"/v1/chats/{chat_id}/messages/{said['id']}",
                           json={"content": "The spare key hangs by the red door."})
    assert r.status_code == 200, r.text
    body = await say(client, chat_id, "Thanks.")
    assert "skipped" in body["diagnostics"]["memory"]["retrieval"]
    assert await _search(client, chat_id, "spare key red door") == [
        "The spare key hangs by the red door."]


async def test_the_search_goes_on_indexing_where_it_stopped(
    client: httpx.AsyncClient, core: Core
) -> None:
    """A chat longer than one backfill: each search indexes the next part (a word no chunk
    held at the last search is found once one does), and the chat's own update time stays
    as it was."""
    chat_id = await scripted_chat(client, [{"text": "ok"}],
                                  settings={"retrieval": {"backfill_limit": 20}})
    turns, _ = long_chat(50, facts=[])
    await add_messages(core, chat_id, [*turns, ("user", "The parrot's name is Zanzibar.")])
    before = (await client.get(f"/v1/chats/{chat_id}")).json()["updated_at"]
    assert await _search(client, chat_id, "parrot Zanzibar") == []
    assert len(await _chunks(core, chat_id)) == 20
    assert await _search(client, chat_id, "parrot Zanzibar") == []
    assert (await _search(client, chat_id, "parrot Zanzibar"))[0] == (
        "The parrot's name is Zanzibar.")
    assert (await client.get(f"/v1/chats/{chat_id}")).json()["updated_at"] == before
