"""R2.5 / SPEC §13 "Memory over HTTP": memory block CRUD, scope and limit checks, documents,
settings; master only."""

from __future__ import annotations

import httpx

from evacore.core import Core
from evacore.store.tables import Character
from tests.conftest import make_user


async def _chat(client: httpx.AsyncClient, **body: object) -> str:
    r = await client.post("/v1/chats", json=body)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def _character(core: Core, name: str = "Mira") -> str:
    async with core.session() as s:
        ch = Character(name=name, data={"name": name, "description": f"{name} is kind.",
                                        "scenario": "A quiet library."})
        s.add(ch)
        await s.flush()
        return ch.id


async def test_r2_5_memory_block_crud_over_http_for_the_master_only(
    client: httpx.AsyncClient,
) -> None:
    chat_id = await _chat(client)
    r = await client.post("/v1/memory", json={"chat_id": chat_id, "label": "facts",
                                              "content": "Likes tea."})
    assert r.status_code == 201, r.text
    block = r.json()
    assert block["id"] and block["chat_id"] == chat_id and block["scope"] == "chat"
    assert (block["label"], block["content"], block["limit"]) == ("facts", "Likes tea.", 2000)
    assert block["mandatory"] is False and block["read_only"] is False

    listed = (await client.get("/v1/memory", params={"chat_id": chat_id})).json()["blocks"]
    assert [b["id"] for b in listed] == [block["id"]]

    r = await client.patch(f"/v1/memory/{block['id']}",
                           json={"content": "Likes green tea.", "read_only": True})
    assert r.status_code == 200, r.text
    assert r.json()["content"] == "Likes green tea." and r.json()["read_only"] is True
    assert (await client.get(f"/v1/memory/{block['id']}")).json()["content"] == "Likes green tea."

    assert (await client.delete(f"/v1/memory/{block['id']}")).status_code == 204
    assert (await client.get(f"/v1/memory/{block['id']}")).status_code == 404
    assert (await client.get("/v1/memory", params={"chat_id": chat_id})).json()["blocks"] == []

    # master only
    trusted = {"Authorization": f"Bearer {await make_user(client, 'trusted')}"}
    for method, url, kwargs in (
        ("post", "/v1/memory", {"json": {"chat_id": chat_id, "label": "x"}}),
        ("get", "/v1/memory", {"params": {"chat_id": chat_id}}),
        ("get", "/v1/memory/documents", {}),
        ("get", "/v1/memory/settings", {}),
        ("post", "/v1/memory/search", {"json": {"chat_id": chat_id, "query": "x"}}),
    ):
        r = await getattr(client, method)(url, headers=trusted, **kwargs)
        assert r.status_code == 403, (url, r.text)


async def test_r2_5_memory_block_scope_and_limit_are_checked(
    client: httpx.AsyncClient, core: Core
) -> None:
    chat_id = await _chat(client)
    char_id = await _character(core)
    two = await client.post("/v1/memory", json={"chat_id": chat_id, "character_id": char_id,
                                                "label": "x"})
    assert two.status_code == 422 and "exactly one" in two.json()["error"]["message"]
    none = await client.post("/v1/memory", json={"label": "x"})
    assert none.status_code == 422
    missing = await client.post("/v1/memory", json={"chat_id": "nope", "label": "x"})
    assert missing.status_code == 422 and "does not exist" in missing.json()["error"]["message"]
    over = await client.post("/v1/memory", json={"character_id": char_id, "label": "x",
                                                 "content": "a" * 11, "limit": 10})
    assert over.status_code == 422 and "limit" in over.json()["error"]["message"]

    ok = await client.post("/v1/memory", json={"character_id": char_id, "label": "x",
                                               "content": "a" * 10, "limit": 10})
    assert ok.status_code == 201 and ok.json()["character_id"] == char_id
    block_id = ok.json()["id"]
    grow = await client.patch(f"/v1/memory/{block_id}", json={"content": "a" * 11})
    assert grow.status_code == 422
    shrink = await client.patch(f"/v1/memory/{block_id}", json={"limit": 5})
    assert shrink.status_code == 422
    assert (await client.get(f"/v1/memory/{block_id}")).json()["content"] == "a" * 10
    dup = await client.post("/v1/memory", json={"character_id": char_id, "label": "x"})
    assert dup.status_code == 409
    # the same label in another scope is fine
    assert (await client.post("/v1/memory", json={"chat_id": chat_id, "label": "x"})
            ).status_code == 201
    bad_position = await client.post("/v1/memory", json={"chat_id": chat_id, "label": "y",
                                                         "position": "middle"})
    assert bad_position.status_code == 422


async def test_r2_5_inherited_blocks_of_a_chat_are_listed(
    client: httpx.AsyncClient, core: Core
) -> None:
    char_id = await _character(core)
    chat_id = await _chat(client, character_id=char_id)
    me = (await client.get("/v1/me")).json()["id"]
    for scope in ({"chat_id": chat_id}, {"character_id": char_id}, {"user_id": me}):
        r = await client.post("/v1/memory", json={**scope, "label": next(iter(scope))})
        assert r.status_code == 201, r.text
    own = (await client.get("/v1/memory", params={"chat_id": chat_id})).json()["blocks"]
    assert [b["label"] for b in own] == ["chat_id"]
    all_ = (await client.get("/v1/memory", params={"chat_id": chat_id, "inherited": True})
            ).json()["blocks"]
    assert [b["label"] for b in all_] == ["user_id", "character_id", "chat_id"]


async def test_r2_5_documents_upload_list_delete_and_refusals(
    client: httpx.AsyncClient,
) -> None:
    chat_id = await _chat(client)
    text = "# Ship log\n\n" + "\n\n".join(
        f"Day {i}: the crew of the Albatross sailed past island {i}." for i in range(200))
    r = await client.post("/v1/memory/documents", data={"chat_id": chat_id},
                          files={"file": ("log.md", text.encode(), "text/markdown")})
    assert r.status_code == 201, r.text
    doc = r.json()
    assert doc["name"] == "log.md" and doc["chat_id"] == chat_id and doc["chunks"] > 3
    listed = (await client.get("/v1/memory/documents", params={"chat_id": chat_id})).json()
    assert [d["id"] for d in listed["documents"]] == [doc["id"]]
    found = (await client.post("/v1/memory/search", json={
        "chat_id": chat_id, "query": "Which island did the Albatross pass on day 137?"})).json()
    assert found["results"] and "island 137" in found["results"][0]["text"]
    assert found["results"][0]["source"] == f"document:{doc['id']}"
    assert (await client.delete(f"/v1/memory/documents/{doc['id']}")).status_code == 204
    assert (await client.get("/v1/memory/documents")).json()["documents"] == []
    after = (await client.post("/v1/memory/search", json={
        "chat_id": chat_id, "query": "Albatross island"})).json()
    assert after["results"] == []
    assert (await client.delete(f"/v1/memory/documents/{doc['id']}")).status_code == 404

    # what is not UTF-8 text or Markdown is refused, and nothing is stored
    png = b"\x89PNG\r\n\x1a\n" + bytes(100)
    r = await client.post("/v1/memory/documents",
                          files={"file": ("a.png", png, "image/png")})
    assert r.status_code == 415
    r = await client.post("/v1/memory/documents",
                          files={"file": ("a.txt", "é".encode("latin-1") * 10, "text/plain")})
    assert r.status_code == 415 and "UTF-8" in r.json()["error"]["message"]
    r = await client.post("/v1/memory/documents", files={"file": ("a.txt", b"  \n", "text/plain")})
    assert r.status_code == 422
    r = await client.post("/v1/memory/documents", data={"chat_id": "nope"},
                          files={"file": ("a.txt", b"hello", "text/plain")})
    assert r.status_code == 422
    assert (await client.get("/v1/memory/documents")).json()["documents"] == []


async def test_r2_5_retrieval_settings_are_validated(client: httpx.AsyncClient) -> None:
    r = await client.patch("/v1/memory/settings", json={"retrieval": {"top_k": 3,
                                                                      "min_score": 0.3}})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["retrieval"]["top_k"] == 3 and body["retrieval"]["min_score"] == 0.3
    assert body["embeddings"] is None
    assert (await client.patch("/v1/memory/settings", json={"retrieval": {"top_k": -1}})
            ).status_code == 422
    assert (await client.patch("/v1/memory/settings", json={"retrieval": {"bogus": 1}})
            ).status_code == 422
    assert (await client.patch("/v1/memory/settings",
                               json={"embeddings": {"kind": "openai", "model": "m"}})
            ).status_code == 422
    r = await client.patch("/v1/memory/settings", json={"embeddings": {
        "kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "e5",
        "api_key": "sk-secret"}})
    assert r.status_code == 200, r.text
    assert r.json()["embeddings"]["api_key_set"] is True and "sk-secret" not in r.text
    r = await client.patch("/v1/memory/settings", json={"embeddings": None})
    assert r.json()["embeddings"] is None
    assert (await client.get("/v1/memory/settings")).json()["retrieval"]["top_k"] == 3
