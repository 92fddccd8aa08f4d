"""Building chats for memory tests: many messages written straight to the store (fast), a
scripted mock connection, and reading a tour's diagnostics."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import numpy as np
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


_CONCEPTS = ({"automobile", "car", "vehicle", "sedan"}, {"ocean", "sea", "waves"})


def fake_vector(text: str) -> list[float]:
    """Concept words share a direction (a paraphrase lands close); other words hash."""
    v = np.zeros(16)
    for word in re.findall(r"\w+", text.lower()):
        hit = [i for i, group in enumerate(_CONCEPTS) if word in group]
        if hit:
            v[hit[0]] += 3.0
        else:
            v[2 + hash(word) % 14] += 0.3
    return list(v)


def embeddings_endpoint(seen: list[dict], status: int = 200) -> httpx.MockTransport:
    """An OpenAI-compatible embeddings endpoint answering with `fake_vector` (or `status`)."""
    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append({"url": str(request.url), "auth": request.headers.get("authorization"),
                     "body": body})
        if status != 200:
            return httpx.Response(status, text="overloaded")
        data = [{"index": i, "embedding": fake_vector(t)} for i, t in enumerate(body["input"])]
        return httpx.Response(200, json={"data": list(reversed(data)), "model": body["model"]})
    return httpx.MockTransport(handle)
