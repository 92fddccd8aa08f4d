"""Lorebook edits at once (R8 API, §0): a book's entries patched while the whole book is
replaced, entries added and deleted beside them, on SQLite and PostgreSQL. Every request
answers 2xx (or 404 for an entry another request removed first), never a 5xx, and the book
ends in a state one of the requests wrote."""

from __future__ import annotations

import asyncio

import httpx


def _entry(uid: int, content: str) -> dict:
    return {"uid": uid, "key": [f"k{uid}"], "content": content}


async def test_r8_concurrent_book_and_entry_edits_never_fail(client: httpx.AsyncClient) -> None:
    r = await client.post("/v1/lorebooks", json={
        "name": "race", "entries": [_entry(i, f"v0-{i}") for i in range(3)]})
    assert r.status_code == 201, r.text
    book = r.json()["id"]
    calls = []
    for round_ in range(6):
        calls += [
            client.patch(f"/v1/lorebooks/{book}/entries/0", json={"content": f"e{round_}"}),
            client.patch(f"/v1/lorebooks/{book}", json={
                "entries": [_entry(i, f"r{round_}-{i}") for i in range(3)]}),
            client.post(f"/v1/lorebooks/{book}/entries", json=_entry(10 + round_, "new")),
            client.delete(f"/v1/lorebooks/{book}/entries/{10 + round_ - 1}"),
            client.patch(f"/v1/lorebooks/{book}", json={"description": f"d{round_}"}),
        ]
    answers = await asyncio.gather(*calls)
    codes = [r.status_code for r in answers]
    assert all(c < 500 for c in codes), [r.text for r in answers if r.status_code >= 500]
    assert all(c in (200, 201, 204, 404) for c in codes), codes
    final = (await client.get(f"/v1/lorebooks/{book}")).json()
    contents = {e["uid"]: e["content"] for e in final["entries"]}
    assert contents[0].startswith(("e", "r")) and set(range(3)) <= set(contents)
