"""Every id a request names is checked against what the caller may use (R8, roles of
SPEC §1). A persona is its user's own: user B cannot attach user A's persona to B's chat
(404, exactly as for an id that does not exist), on create, PATCH or import, and a row
written before this check does not leak A's persona into B's prompt or diagnostics.
Shared records (connections, characters, lorebooks) may be named by anyone."""

from __future__ import annotations

import json

import httpx
from sqlalchemy import update

from evacore.core import Core
from evacore.store.tables import Chat
from tests.conftest import make_user

SECRET = "Alice keeps the vault code 4921 in her left boot."


async def _user(client: httpx.AsyncClient, role: str, name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {await make_user(client, role, name)}"}


async def _persona(client: httpx.AsyncClient, who: dict[str, str], name: str,
                   description: str = "") -> str:
    r = await client.post("/v1/personas", headers=who,
                          json={"name": name, "description": description})
    assert r.status_code == 201, r.text
    return r.json()["id"]


async def test_r8_user_b_cannot_attach_user_as_persona_to_bs_chat(
    client: httpx.AsyncClient
) -> None:
    alice, bob = await _user(client, "trusted", "alice"), await _user(client, "trusted", "bob")
    hers = await _persona(client, alice, "Alice", SECRET)
    r = await client.post("/v1/chats", headers=bob, json={"persona_id": hers})
    assert r.status_code == 404, r.text
    missing = await client.post("/v1/chats", headers=bob,
                                json={"persona_id": "0123456789abcdef01234567"})
    assert missing.status_code == 404
    assert (r.json()["error"]["message"].replace(hers, "ID")
            == missing.json()["error"]["message"].replace("0123456789abcdef01234567", "ID"))
    assert (await client.get("/v1/chats", headers=bob)).json()["chats"] == []
    chat = (await client.post("/v1/chats", headers=bob, json={})).json()["id"]
    r = await client.patch(f"/v1/chats/{chat}", headers=bob, json={"persona_id": hers})
    assert r.status_code == 404, r.text
    assert (await client.get(f"/v1/chats/{chat}", headers=bob)).json()["persona_id"] is None
    jsonl = (b'{"user_name": "U", "character_name": "C"}\n'
             b'{"name": "U", "is_user": true, "mes": "hi"}\n')
    r = await client.post("/v1/chats/import", headers=bob, files={"file": ("c.jsonl", jsonl)},
                          data={"persona_id": hers})
    assert r.status_code == 404, r.text
    assert len((await client.get("/v1/chats", headers=bob)).json()["chats"]) == 1
    his = await _persona(client, bob, "Bob")
    r = await client.patch(f"/v1/chats/{chat}", headers=bob, json={"persona_id": his})
    assert r.status_code == 200 and r.json()["persona_id"] == his


async def test_r8_shared_records_may_be_named_by_any_user(client: httpx.AsyncClient) -> None:
    guest = await _user(client, "guest", "gina")
    conn = await client.post("/v1/connections", json={"name": "m", "kind": "mock"})
    character = await client.post("/v1/characters", json={
        "spec": "chara_card_v2", "spec_version": "2.0",
        "data": {"name": "Orla", "description": "A sailor."}})
    book = await client.post("/v1/lorebooks", json={"name": "Sea", "entries": []})
    assert {conn.status_code, character.status_code, book.status_code} == {201}, book.text
    r = await client.post("/v1/chats", headers=guest, json={
        "connection_id": conn.json()["id"], "character_id": character.json()["id"],
        "lorebook_ids": [book.json()["id"]]})
    assert r.status_code == 201, r.text
    for field, value in (("connection_id", "nope"), ("character_id", "nope"),
                         ("lorebook_ids", ["nope"])):
        r = await client.post("/v1/chats", headers=guest, json={field: value})
        assert r.status_code == 422 and "does not exist" in r.json()["error"]["message"]


async def test_r8_the_master_may_use_any_persona_in_a_chat_of_their_own_only(
    client: httpx.AsyncClient
) -> None:
    alice, bob = await _user(client, "guest", "alice"), await _user(client, "guest", "bob")
    hers, his = await _persona(client, alice, "Alice"), await _persona(client, bob, "Bob")
    own = await client.post("/v1/chats", json={"persona_id": hers})
    assert own.status_code == 201, own.text
    bobs_chat = (await client.post("/v1/chats", headers=bob, json={})).json()["id"]
    r = await client.patch(f"/v1/chats/{bobs_chat}", json={"persona_id": hers})
    assert r.status_code == 422 and "chat owner" in r.json()["error"]["message"]
    r = await client.patch(f"/v1/chats/{bobs_chat}", json={"persona_id": his})
    assert r.status_code == 200, r.text


async def test_r8_a_foreign_persona_stored_before_is_not_read_into_the_prompt(
    client: httpx.AsyncClient, core: Core
) -> None:
    alice, bob = await _user(client, "guest", "alice"), await _user(client, "guest", "bob")
    hers = await _persona(client, alice, "Alice", SECRET)
    chat = (await client.post("/v1/chats", headers=bob, json={})).json()["id"]
    async with core.session() as s:  # as an older release let it be written
        await s.execute(update(Chat).where(Chat.id == chat).values(persona_id=hers))
    r = await client.post(f"/v1/chats/{chat}/generate", headers=bob,
                          json={"message": {"content": "who am I?"}, "stream": False})
    assert r.status_code == 200, r.text
    tour = await client.get(f"/v1/tours/{r.json()['tour_id']}", headers=bob)
    seen = json.dumps(tour.json()) + r.text
    assert "vault code" not in seen and "Alice" not in seen
    assert any("persona" in line for line in tour.json()["diagnostics"]["ignored"])
    stored = (await client.get(f"/v1/chats/{chat}/messages", headers=bob)).json()["messages"]
    assert stored[0]["name"] == "User"
