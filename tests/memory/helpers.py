"""Building chats for memory tests: many messages written straight to the store (fast), a
scripted mock connection, and reading a tour's diagnostics."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import insert

from evacore.core import Core
from evacore.domain.ids import new_id, utcnow
from evacore.store import chats as chat_store
from evacore.store.tables import Message, Variant


async def add_messages(core: Core, chat_id: str, turns: list[tuple[str, str]]) -> list[str]:
    """Append (role, text) messages in bulk; answers get an active variant like generated
    ones."""
    messages, variants = [], []
    async with core.session() as s:
        chat = await chat_store.get_chat(s, chat_id)
        start = chat.next_position
        now = utcnow()
        for i, (role, content) in enumerate(turns):
            row = {"id": new_id(), "chat_id": chat_id, "position": start + i, "role": role,
                   "name": "Assistant" if role == "assistant" else "User", "content": content,
                   "images": [], "active_variant_id": None, "hidden": False, "extra": {},
                   "created_at": now}
            if role == "assistant":
                variant_id = new_id()
                row["content"], row["active_variant_id"] = "", variant_id
                variants.append({"id": variant_id, "message_id": row["id"], "content": content,
                                 "steps": [], "status": "complete", "usage": {}, "timings": {},
                                 "meta": {}, "created_at": now})
            messages.append(row)
        await s.execute(insert(Message), messages)
        if variants:
            await s.execute(insert(Variant), variants)
        chat.next_position = start + len(turns)
    return [m["id"] for m in messages]


async def scripted_chat(client: httpx.AsyncClient, script: list[dict[str, Any]], *,
                        context_size: int = 8192, max_tokens: int = 256,
                        headers: dict[str, str] | None = None, **chat: Any) -> str:
    r = await client.post("/v1/connections", json={
        "name": "m", "kind": "mock", "params": {"script": script},
        "context_size": context_size, "max_tokens": max_tokens,
    })
    assert r.status_code == 201, r.text
    r = await client.post("/v1/chats", json={"connection_id": r.json()["id"], **chat},
                          headers=headers)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def say(client: httpx.AsyncClient, chat_id: str, text: str,
              headers: dict[str, str] | None = None) -> dict[str, Any]:
    """One non-streamed turn; returns the generate body with the tour's diagnostics."""
    r = await client.post(f"/v1/chats/{chat_id}/generate",
                          json={"message": {"content": text}, "stream": False}, headers=headers)
    assert r.status_code == 200, r.text
    body = r.json()
    tour = await client.get(f"/v1/tours/{body['tour_id']}")
    assert tour.status_code == 200, tour.text
    body["diagnostics"] = tour.json()["diagnostics"]
    return body


def sent_messages(body: dict[str, Any], step: int = 0) -> list[dict[str, Any]]:
    """The messages the provider was sent in a step."""
    return body["diagnostics"]["requests"][step]["body"]["messages"]
