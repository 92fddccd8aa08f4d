"""R8.2 / R2.3: character cards over HTTP — import (upload and JSON body), read, edit, delete,
export as PNG/JSON/CHARX and import again without losing anything."""

from __future__ import annotations

import io
import json
import random
import zipfile

import httpx
from PIL import Image

from evacore.core import Core
from evacore.lore.model import Lorebook
from evacore.store.lorebooks import load_lorebook
from tests.conftest import make_user
from tests.formats._build import charx, png_text, tiny_image, v3_card
from tests.importing._util import CARDS, upload

SAKANA = next(p for p in CARDS if "Sakana" in p.name)
SERAPHINA = next(p for p in CARDS if "Seraphina" in p.name)


async def _import(client: httpx.AsyncClient, content: bytes, name: str = "card.png") -> dict:
    return (await upload(client, "/v1/characters", content, name)).json()


async def _book(core: Core, character: dict) -> Lorebook:
    async with core.session() as s:
        return await load_lorebook(s, character["lorebook_ids"][0])


async def _exported_book(client: httpx.AsyncClient, character: dict) -> dict | None:
    url = f"/v1/characters/{character['id']}/export?format=json"
    return (await client.get(url)).json()["data"].get("character_book")


async def test_r8_2_every_fixture_card_imports_over_http(client: httpx.AsyncClient) -> None:
    for path in CARDS:
        body = await _import(client, path.read_bytes(), path.name)
        assert body["id"] and body["name"], path.name
        full = (await client.get(f"/v1/characters/{body['id']}")).json()
        assert full["data"]["name"] == body["name"]
        assert full["has_image"] is True
        assert "character_book" not in full["data"]
    listed = (await client.get("/v1/characters")).json()
    assert listed["total"] == len(CARDS)
    assert {c["name"] for c in listed["characters"]} == {
        (await client.get(f"/v1/characters/{c['id']}")).json()["name"]
        for c in listed["characters"]}
    assert all(set(c) >= {"id", "name", "spec", "tags", "created_at"} and "data" not in c
               for c in listed["characters"])


async def test_r8_2_a_json_body_is_a_card(client: httpx.AsyncClient) -> None:
    card = v3_card(name="Iris", tags=["a", "b"], extensions={"depth_prompt": {"prompt": "x"}})
    card["futureTopKey"] = {"kept": True}
    r = await client.post("/v1/characters", content=json.dumps(card),
                          headers={"Content-Type": "application/json"})
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["name"] == "Iris" and body["tags"] == ["a", "b"]
    assert body["extra_top"] == {"futureTopKey": {"kept": True}}
    assert body["has_image"] is False
    r = await client.post("/v1/characters", json={"spec": "chara_card_v2"})
    assert r.status_code == 422 and r.json()["error"]["code"] == "import_invalid"


async def test_r8_2_export_then_import_gives_an_equal_character(
        client: httpx.AsyncClient) -> None:
    """Every fixture through JSON; the image formats with the cards of every spec (V1, V2 with a
    book, V3 without a `chara` backfill), leaving out the two largest pictures for speed."""
    small = [p for p in CARDS if "Amy" not in p.name and "Sakana" not in p.name]
    for fmt, paths in (("json", CARDS), ("png", small), ("charx", small)):
        for path in paths:
            first = await _import(client, path.read_bytes(), path.name)
            r = await client.get(f"/v1/characters/{first['id']}/export", params={"format": fmt})
            assert r.status_code == 200, r.text
            assert r.headers["content-disposition"].startswith("attachment;")
            assert r.headers["content-type"].startswith(
                {"png": "image/png", "json": "application/json", "charx": "application/zip"}[fmt])
            second = await _import(client, r.content, f"again.{fmt}")
            a = (await client.get(f"/v1/characters/{first['id']}")).json()
            b = (await client.get(f"/v1/characters/{second['id']}")).json()
            where = f"{path.name} as {fmt}"
            assert b["data"] == a["data"], where
            assert b["extra_top"] == a["extra_top"], where
            assert await _exported_book(client, b) == await _exported_book(client, a), where
            if fmt != "json":
                avatar_a = (await client.get(f"/v1/characters/{first['id']}/avatar")).content
                avatar_b = (await client.get(f"/v1/characters/{second['id']}/avatar")).content
                size = Image.open(io.BytesIO(avatar_a)).size
                assert Image.open(io.BytesIO(avatar_b)).size == size, where


async def test_r8_2_png_export_opens_with_pillow_and_has_chara_and_ccv3(
        client: httpx.AsyncClient) -> None:
    body = await _import(client, SERAPHINA.read_bytes(), SERAPHINA.name)
    r = await client.get(f"/v1/characters/{body['id']}/export?format=png")
    image = Image.open(io.BytesIO(r.content))
    image.load()
    assert image.format == "PNG"
    v2, v3 = png_text(r.content, "chara"), png_text(r.content, "ccv3")
    assert v2["spec"] == "chara_card_v2" and v3["spec"] == "chara_card_v3"
    assert v3["data"]["name"] == v2["data"]["name"] == body["name"]
    avatar = await client.get(f"/v1/characters/{body['id']}/avatar")
    assert avatar.headers["content-type"] == "image/png"
    assert Image.open(io.BytesIO(avatar.content)).size == image.size


async def test_r8_2_charx_export_comes_back_with_its_assets(client: httpx.AsyncClient) -> None:
    icon, smile = tiny_image(), b"\xff\xd8\xff\xe0fake-jpeg-bytes"
    card = v3_card(name="Mira", assets=[
        {"type": "icon", "uri": "embeded://assets/icon/images/main.png", "name": "main",
         "ext": "png"},
        {"type": "emotion", "uri": "embeded://assets/emotion/images/smile.jpeg",
         "name": "smile", "ext": "jpeg"},
        {"type": "background", "uri": "https://example.invalid/bg.png", "name": "bg",
         "ext": "png"},
    ])
    archive = charx({"card.json": json.dumps(card).encode(),
                     "assets/icon/images/main.png": icon,
                     "assets/emotion/images/smile.jpeg": smile,
                     "x_meta/1.json": b'{"risu": true}'})
    first = await _import(client, archive, "mira.charx")
    assert [(a["name"], a["type"], a["size"]) for a in first["assets"]] == [
        ("main", "icon", len(icon)), ("smile", "emotion", len(smile)), ("bg", "background", None)]
    r = await client.get(f"/v1/characters/{first['id']}/export?format=charx")
    with zipfile.ZipFile(io.BytesIO(r.content)) as z:
        names = set(z.namelist())
        assert {"card.json", "x_meta/1.json"} <= names
        assert smile in {z.read(n) for n in names}
    second = await _import(client, r.content, "again.charx")
    assert [(a["name"], a["type"], a["ext"], a["size"]) for a in second["assets"]] == [
        (a["name"], a["type"], a["ext"], a["size"]) for a in first["assets"]]
    avatar = await client.get(f"/v1/characters/{second['id']}/avatar")
    assert avatar.content == icon


async def test_r2_3_embedded_book_becomes_a_linked_lorebook_and_comes_back(
        client: httpx.AsyncClient, core: Core) -> None:
    body = await _import(client, SAKANA.read_bytes(), SAKANA.name)
    assert body["lorebook_id"] and body["lorebook_ids"] == [body["lorebook_id"]]
    book = await _book(core, body)
    assert len(book.entries) == 14
    exported = (await client.get(f"/v1/characters/{body['id']}/export?format=json")).json()
    entries = exported["data"]["character_book"]["entries"]
    assert [e["content"] for e in entries] == [e.content for e in book.entries]
    assert [e["keys"] for e in entries] == [list(e.keys) for e in book.entries]
    assert entries[0]["extensions"]["display_index"] == book.entries[0].display_index
    chat = (await client.post("/v1/chats", json={"character_id": body["id"]})).json()
    assert chat["character_id"] == body["id"]


async def test_r8_2_patch_validates_card_fields(client: httpx.AsyncClient) -> None:
    body = await _import(client, json.dumps(v3_card(name="Old")).encode(), "c.json")
    url = f"/v1/characters/{body['id']}"
    r = await client.patch(url, json={"data": {"name": "New", "description": "fresh"}})
    assert r.status_code == 200, r.text
    assert r.json()["name"] == "New" and r.json()["data"]["description"] == "fresh"
    assert isinstance(r.json()["data"]["modification_date"], int)
    for bad in ({"description": {"not": "text"}}, {"name": ""}, {"character_book": {}},
                {"extensions": [1]}):
        r = await client.patch(url, json={"data": bad})
        assert r.status_code == 422, (bad, r.text)
    r = await client.patch(url, json={"nickname": "x"})
    assert r.status_code == 422
    after = (await client.get(url)).json()
    assert after["name"] == "New" and after["data"]["description"] == "fresh"


async def test_r8_2_deleting_a_character_leaves_its_chats_working(
        client: httpx.AsyncClient) -> None:
    body = await _import(client, SERAPHINA.read_bytes(), SERAPHINA.name)
    chat = (await client.post("/v1/chats", json={"character_id": body["id"]})).json()
    r = await client.delete(f"/v1/characters/{body['id']}")
    assert r.status_code == 204
    book = await client.get(f"/v1/lorebooks/{body['lorebook_id']}")
    assert book.status_code == 200, book.text
    assert (await client.get(f"/v1/characters/{body['id']}")).status_code == 404
    assert (await client.get(f"/v1/chats/{chat['id']}")).json()["character_id"] is None
    r = await client.post(f"/v1/chats/{chat['id']}/generate",
                          json={"message": {"content": "still there?"}, "stream": False})
    assert r.status_code == 200, r.text


async def test_r8_2_guests_read_but_only_trusted_import(client: httpx.AsyncClient) -> None:
    guest = {"Authorization": f"Bearer {await make_user(client, 'guest')}"}
    trusted = {"Authorization": f"Bearer {await make_user(client, 'trusted')}"}
    card = json.dumps(v3_card(name="G")).encode()
    r = await client.post("/v1/characters", files={"file": ("c.json", card)}, headers=guest)
    assert r.status_code == 403
    r = await client.post("/v1/characters", files={"file": ("c.json", card)}, headers=trusted)
    assert r.status_code == 201
    cid = r.json()["id"]
    assert (await client.get("/v1/characters", headers=guest)).json()["total"] == 1
    assert (await client.get(f"/v1/characters/{cid}/export?format=json",
                             headers=guest)).status_code == 200
    assert (await client.delete(f"/v1/characters/{cid}", headers=guest)).status_code == 403
    r = await client.patch(f"/v1/characters/{cid}", json={"data": {"name": "H"}}, headers=guest)
    assert r.status_code == 403


def _random_json(rng: random.Random, depth: int = 0) -> object:
    roll = rng.random()
    if depth > 3 or roll < 0.45:
        return rng.choice([None, True, 0, -1, 2**63, 1.5, "", "x\u0000y", "\U0001f319",
                           "{{user}}", rng.randbytes(4).hex()])
    if roll < 0.7:
        return [_random_json(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice(["a", "name", "tags", "extensions", "first_mes"]): _random_json(
        rng, depth + 1) for _ in range(rng.randint(0, 3))}


async def test_r8_2_random_edits_never_break_the_server(client: httpx.AsyncClient) -> None:
    """Arbitrary JSON in PATCH: a 200 leaves a card that still exports, any error is a 4xx."""
    body = await _import(client, json.dumps(v3_card(name="Fuzz")).encode(), "f.json")
    url = f"/v1/characters/{body['id']}"
    rng = random.Random(2024)
    fields = ["name", "description", "tags", "alternate_greetings", "extensions", "nickname",
              "creator_notes_multilingual", "character_version", "first_mes", "mystery"]
    statuses = set()
    for _ in range(40):
        patch = {rng.choice(fields): _random_json(rng) for _ in range(rng.randint(1, 3))}
        r = await client.patch(url, json={"data": patch})
        statuses.add(r.status_code)
        assert r.status_code < 500, (patch, r.text)
        if r.status_code == 200:
            exported = await client.get(f"{url}/export", params={"format": "png"})
            assert exported.status_code == 200, (patch, exported.text)
    assert statuses == {200, 422}


async def test_r2_4_an_imported_card_book_activates_in_its_chats(
        client: httpx.AsyncClient) -> None:
    book = {"entries": [{"keys": ["lighthouse"], "content": "The keeper is named Ada.",
                         "enabled": True, "insertion_order": 100}]}
    card = v3_card(name="Keeper", character_book=book)
    body = await _import(client, json.dumps(card).encode(), "keeper.json")
    chat = (await client.post("/v1/chats", json={"character_id": body["id"]})).json()
    r = await client.post(f"/v1/chats/{chat['id']}/generate",
                          json={"message": {"content": "Tell me about the lighthouse."},
                                "stream": False})
    assert r.status_code == 200, r.text
    tour = (await client.get(f"/v1/tours/{r.json()['tour_id']}")).json()
    assert "The keeper is named Ada." in json.dumps(tour["diagnostics"])
    other = (await client.post("/v1/chats", json={"character_id": body["id"]})).json()
    r = await client.post(f"/v1/chats/{other['id']}/generate",
                          json={"message": {"content": "Hello."}, "stream": False})
    tour = (await client.get(f"/v1/tours/{r.json()['tour_id']}")).json()
    assert "The keeper is named Ada." not in json.dumps(tour["diagnostics"])
