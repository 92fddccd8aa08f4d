"""R8.2 / §13 "Personas": personas (`{{user}}` is the chat's persona name) and SillyTavern
presets over HTTP — import, master exports, validation, export, and use by a connection."""

from __future__ import annotations

import json

import httpx

from evacore.core import Core
from evacore.pipeline.stages.instruct import resolve_templates
from tests.conftest import make_user
from tests.formats._build import v3_card
from tests.importing._util import FIXTURES, PRESETS, upload


async def test_personas_crud_and_user_macro(client: httpx.AsyncClient) -> None:
    r = await client.post("/v1/personas", json={"name": "Alice", "description": "A pilot."})
    assert r.status_code == 201, r.text
    persona = r.json()
    assert persona["name"] == "Alice" and persona["description"] == "A pilot."
    card = json.dumps(v3_card(name="Bo", first_mes="Hello, {{user}}!")).encode()
    character = (await upload(client, "/v1/characters", card, "bo.json")).json()
    chat = (await client.post("/v1/chats", json={"character_id": character["id"],
                                                 "persona_id": persona["id"]})).json()
    msgs = (await client.get(f"/v1/chats/{chat['id']}/messages")).json()["messages"]
    assert msgs[0]["content"] == "Hello, Alice!"
    url = f"/v1/personas/{persona['id']}"
    r = await client.patch(url, json={"name": "Alicia"})
    assert r.status_code == 200 and r.json()["name"] == "Alicia"
    assert r.json()["description"] == "A pilot."
    assert (await client.get("/v1/personas")).json()["total"] == 1
    for bad in ({"name": ""}, {"name": "x" * 301}, {"name": "a\x00b"}, {"nick": "x"}):
        assert (await client.post("/v1/personas", json=bad)).status_code == 422, bad
    assert (await client.delete(url)).status_code == 204
    assert (await client.get(url)).status_code == 404
    assert (await client.get(f"/v1/chats/{chat['id']}")).json()["persona_id"] is None


async def test_personas_belong_to_their_user(client: httpx.AsyncClient) -> None:
    guest = {"Authorization": f"Bearer {await make_user(client, 'guest')}"}
    mine = (await client.post("/v1/personas", json={"name": "Master's"})).json()
    r = await client.post("/v1/personas", json={"name": "Guest's"}, headers=guest)
    assert r.status_code == 201
    listed = (await client.get("/v1/personas", headers=guest)).json()["personas"]
    assert [p["name"] for p in listed] == ["Guest's"]
    assert (await client.get(f"/v1/personas/{mine['id']}", headers=guest)).status_code == 404
    assert (await client.delete(f"/v1/personas/{mine['id']}", headers=guest)).status_code == 404
    assert (await client.get("/v1/personas")).json()["total"] == 2


async def test_r8_2_every_fixture_preset_imports_and_exports_unchanged(
        client: httpx.AsyncClient) -> None:
    for path in PRESETS:
        body = (await upload(client, "/v1/presets/import", path.read_bytes(), path.name)).json()
        (only,) = body["presets"]
        assert only["kind"] in path.parent.name or only["kind"] in path.name, path
        r = await client.get(f"/v1/presets/{only['id']}/export")
        assert r.status_code == 200
        assert r.json() == json.loads(path.read_bytes()), path
    kinds = {p["kind"] for p in (await client.get("/v1/presets")).json()["presets"]}
    assert kinds == {"instruct", "context", "sysprompt"}
    instruct = (await client.get("/v1/presets", params={"kind": "instruct"})).json()["presets"]
    assert all(p["kind"] == "instruct" for p in instruct)
    assert sorted(p["name"] for p in instruct) == ["ChatML", "Llama 3 Instruct", "Mistral V2 & V3"]
    chatml = next(p for p in instruct if p["name"] == "ChatML")
    newer = json.loads((FIXTURES / "presets/newer/instruct-ChatML.json").read_bytes())
    assert (await client.get(f"/v1/presets/{chatml['id']}")).json()["data"] == newer


async def test_r8_2_a_master_export_yields_several_presets(client: httpx.AsyncClient) -> None:
    def load(sub: str) -> dict:
        return json.loads((FIXTURES / "presets" / sub / "ChatML.json").read_bytes())

    master = {"instruct": load("instruct"), "context": load("context"),
              "sysprompt": json.loads((FIXTURES / "presets/sysprompt/Neutral-Chat.json")
                                      .read_bytes())}
    body = (await upload(client, "/v1/presets/import", json.dumps(master).encode())).json()
    assert [(p["kind"], p["name"]) for p in body["presets"]] == [
        ("instruct", "ChatML"), ("context", "ChatML"), ("sysprompt", "Neutral - Chat")]
    again = (await upload(client, "/v1/presets/import", json.dumps(master).encode())).json()
    assert [p["id"] for p in again["presets"]] == [p["id"] for p in body["presets"]]
    assert all(p["replaced"] for p in again["presets"])


async def test_r8_2_plain_preset_create_is_validated_and_guests_only_read(client: httpx.AsyncClient) -> None:
    good = {"input_sequence": "<u>", "output_sequence": "<a>", "wrap": False}
    r = await client.post("/v1/presets", json={"kind": "instruct", "name": "Mine", "data": good})
    assert r.status_code == 201, r.text
    assert r.json()["data"]["name"] == "Mine"
    bad = [{"kind": "instruct", "name": "B", "data": {"input_sequence": ["x"]}},
           {"kind": "context", "name": "B", "data": {"story_string": 7}},
           {"kind": "reasoning", "name": "B", "data": {"prefix": 1}},
           {"kind": "weird", "name": "B", "data": {}},
           {"kind": "instruct", "name": "", "data": good}]
    for body in bad:
        r = await client.post("/v1/presets", json=body)
        assert r.status_code == 422, (body, r.text)
    pid = (await client.get("/v1/presets")).json()["presets"][0]["id"]
    r = await client.patch(f"/v1/presets/{pid}", json={"data": {"input_sequence": 3}})
    assert r.status_code == 422
    r = await client.patch(f"/v1/presets/{pid}", json={"name": "Renamed"})
    assert r.status_code == 200 and r.json()["data"]["name"] == "Renamed"
    guest = {"Authorization": f"Bearer {await make_user(client, 'guest')}"}
    path = PRESETS[0]
    r = await client.post("/v1/presets/import", files={"file": (path.name, path.read_bytes())},
                          headers=guest)
    assert r.status_code == 403
    r = await client.post("/v1/presets", headers=guest,
                          json={"kind": "sysprompt", "name": "x", "data": {"content": "y"}})
    assert r.status_code == 403
    assert (await client.delete(f"/v1/presets/{pid}", headers=guest)).status_code == 403
    assert (await client.get(f"/v1/presets/{pid}", headers=guest)).status_code == 200
    assert (await client.delete(f"/v1/presets/{pid}")).status_code == 204
    assert (await client.get(f"/v1/presets/{pid}")).status_code == 404


async def test_r8_2_connection_uses_an_imported_instruct_preset_by_name_or_id(
        client: httpx.AsyncClient, core: Core) -> None:
    data = {"input_sequence": "<<U>>", "output_sequence": "<<A>>"}
    r = await client.post("/v1/presets", json={"kind": "instruct", "name": "House", "data": data})
    preset_id = r.json()["id"]
    for ref in ("House", preset_id):
        instruct, _ = await resolve_templates(core, {"instruct": {"preset": ref},
                                                     "model": "whatever"})
        assert (instruct.input_sequence, instruct.output_sequence) == ("<<U>>", "<<A>>")
