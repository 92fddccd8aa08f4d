"""Helpers for the lorebook integration tests: books, chats and tours through the API.

Must not: assert anything beyond response status checks.
"""

from __future__ import annotations

from typing import Any

import httpx

from tests.helpers import FIXTURES  # noqa: E402,I001

ELDORIA = FIXTURES / "worldinfo" / "st_Eldoria.json"
SAKANA = FIXTURES / "cards" / "st_content_Sakana.v2-characterbook.png"


def wi_entry(uid: int, keys: list[str], content: str, **fields: Any) -> dict[str, Any]:
    """An entry in SillyTavern World Info form."""
    return {"uid": uid, "key": keys, "content": content, "comment": f"entry {uid}", **fields}


async def make_book(client: httpx.AsyncClient, entries: list[dict[str, Any]],
                    name: str = "Book", **fields: Any) -> str:
    r = await client.post("/v1/lorebooks", json={"name": name, "entries": entries, **fields})
    assert r.status_code == 201, r.text
    return r.json()["id"]


async def quiet_connection(client: httpx.AsyncClient, **fields: Any) -> str:
    """A mock connection that always answers "Fine." (so answers never match a key)."""
    r = await client.post("/v1/connections", json={
        "name": "m", "kind": "mock", "params": {"script": [{"text": "Fine."}]}, **fields})
    assert r.status_code == 201, r.text
    return r.json()["id"]


async def make_chat(client: httpx.AsyncClient, **fields: Any) -> str:
    r = await client.post("/v1/chats", json=fields)
    assert r.status_code == 201, r.text
    return r.json()["id"]


async def tour(client: httpx.AsyncClient, chat_id: str, text: str = "",
               mode: str = "normal") -> dict[str, Any]:
    """Run one non-streamed tour; returns the tour's diagnostics."""
    body: dict[str, Any] = {"stream": False, "mode": mode}
    if text:
        body["message"] = {"content": text}
    r = await client.post(f"/v1/chats/{chat_id}/generate", json=body)
    assert r.status_code == 200, r.text
    t = await client.get(f"/v1/tours/{r.json()['tour_id']}")
    assert t.status_code == 200, t.text
    return t.json()["diagnostics"]


def sent(diag: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages of the tour's first provider request."""
    return diag["requests"][0]["body"]["messages"]


def activated(diag: dict[str, Any]) -> set[int]:
    return {a["uid"] for a in diag["lore"]["activated"]}


def cut_reasons(diag: dict[str, Any]) -> dict[int, str]:
    return {c["uid"]: c["reason"] for c in diag["lore"]["cut"]}


def index_of(messages: list[dict[str, Any]], needle: str) -> int:
    for i, m in enumerate(messages):
        if isinstance(m["content"], str) and needle in m["content"]:
            return i
    raise AssertionError(f"{needle!r} not in the prompt: {[m['content'][:60] for m in messages]}")
