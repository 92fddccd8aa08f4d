"""Deleting a message, a chat or a character takes what memory kept about it along: no
deleted text stays in the retrieval index (the database cascades chunks with messages and
chats), no orphaned block or document stays behind, and other scopes are untouched."""

from __future__ import annotations

import httpx
from sqlalchemy import func, select

from evacore.core import Core
from evacore.memory.schema import chunks, documents
from evacore.store.tables import Character, MemoryBlock
from tests.memory.helpers import add_messages, say, scripted_chat


async def _chunk_count(core: Core, **where: str) -> int:
    async with core.session() as s:
        stmt = select(func.count()).select_from(chunks)
        for column, value in where.items():
            stmt = stmt.where(chunks.c[column] == value)
        return int(await s.scalar(stmt) or 0)


async def _document(client: httpx.AsyncClient, text: str, **scope: str) -> str:
    r = await client.post("/v1/memory/documents", data=scope,
                          files={"file": ("notes.md", text.encode(), "text/markdown")})
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def _search(client: httpx.AsyncClient, chat_id: str, query: str) -> list[str]:
    r = await client.post("/v1/memory/search", json={"chat_id": chat_id, "query": query})
    assert r.status_code == 200, r.text
    return [hit["text"] for hit in r.json()["results"]]


async def _block(client: httpx.AsyncClient, label: str, **scope: str) -> str:
    r = await client.post("/v1/memory", json={**scope, "label": label, "content": "kept"})
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def test_a_deleted_message_leaves_the_retrieval_index(
    client: httpx.AsyncClient, core: Core
) -> None:
    chat_id = await scripted_chat(client, [{"text": "ok"}])
    [secret, _] = await add_messages(core, chat_id, [("user", "My locker code is 4417."),
                                                     ("assistant", "Noted.")])
    await say(client, chat_id, "hello")
    await _search(client, chat_id, "locker code")  # indexes the chat
    assert await _chunk_count(core, message_id=secret) == 1
    r = await client.delete(f"/v1/chats/{chat_id}/messages/{secret}")
    assert r.status_code == 204, r.text
    assert await _chunk_count(core, message_id=secret) == 0
    assert all("4417" not in text for text in await _search(client, chat_id, "locker code"))


async def test_a_deleted_chat_takes_its_chunks_blocks_and_documents(
    client: httpx.AsyncClient, core: Core
) -> None:
    chat_id = await scripted_chat(client, [{"text": "Understood."}])
    other = await scripted_chat(client, [{"text": "Fine."}])
    await say(client, chat_id, "The vault opens with the word marigold.")
    await say(client, other, "Nothing to hide here.")
    await _search(client, chat_id, "vault")  # indexes each chat
    await _search(client, other, "hide")
    doc = await _document(client, "Chat-only notes about the vault.", chat_id=chat_id)
    await _block(client, "facts", chat_id=chat_id)
    kept_block = await _block(client, "facts", chat_id=other)
    assert await _chunk_count(core, chat_id=chat_id) >= 2

    assert (await client.delete(f"/v1/chats/{chat_id}")).status_code == 204
    assert await _chunk_count(core, chat_id=chat_id) == 0
    assert await _chunk_count(core, document_id=doc) == 0
    async with core.session() as s:
        assert await s.scalar(select(func.count()).select_from(documents)
                              .where(documents.c.id == doc)) == 0
        assert await s.scalar(select(func.count()).select_from(MemoryBlock)
                              .where(MemoryBlock.scope_id == chat_id)) == 0
        assert await s.get(MemoryBlock, kept_block) is not None
    assert await _chunk_count(core, chat_id=other) >= 2  # the other chat keeps its index


async def test_a_deleted_character_takes_its_blocks_and_documents(
    client: httpx.AsyncClient, core: Core
) -> None:
    async with core.session() as s:
        gone = Character(name="Mira", data={"name": "Mira", "description": "Mira is kind."})
        stays = Character(name="Oren", data={"name": "Oren", "description": "Oren is loud."})
        s.add_all([gone, stays])
        await s.flush()
        gone_id, stays_id = gone.id, stays.id
    doc = await _document(client, "Mira's diary.", character_id=gone_id)
    other_doc = await _document(client, "Oren's diary.", character_id=stays_id)
    await _block(client, "persona", character_id=gone_id)
    other_block = await _block(client, "persona", character_id=stays_id)

    r = await client.delete(f"/v1/characters/{gone_id}")
    assert r.status_code == 204, r.text
    listed = (await client.get("/v1/memory/documents")).json()["documents"]
    assert [d["id"] for d in listed] == [other_doc]
    assert await _chunk_count(core, document_id=doc) == 0
    async with core.session() as s:
        assert await s.scalar(select(func.count()).select_from(MemoryBlock)
                              .where(MemoryBlock.scope_id == gone_id)) == 0
        assert await s.get(MemoryBlock, other_block) is not None
