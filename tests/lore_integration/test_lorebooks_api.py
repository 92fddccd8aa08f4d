"""R8.2, §13: `/v1/lorebooks` (books, entries, import/export, links) and `/v1/settings`."""

from __future__ import annotations

import json

import httpx

from evacore.core import Core
from evacore.formats.limits import Limits
from evacore.formats.worldinfo import read_world_info
from tests.conftest import make_user
from tests.lore_integration._util import ELDORIA, make_book, make_chat, wi_entry


async def test_r8_2_books_and_entries_are_edited_through_the_api(client: httpx.AsyncClient) -> None:
    book_id = await make_book(client, [
        wi_entry(3, ["castle"], "A castle.", order=50, myExtension={"kept": True}),
        {"key": ["moat"], "content": "A moat."},
    ], name="Keep", scan_depth=5)
    book = (await client.get(f"/v1/lorebooks/{book_id}")).json()
    assert book["name"] == "Keep" and book["scan_depth"] == 5 and book["entry_count"] == 2
    by_uid = {e["uid"]: e for e in book["entries"]}
    assert set(by_uid) == {0, 3}, "a missing uid takes the first free one"
    assert by_uid[3]["key"] == ["castle"] and by_uid[3]["order"] == 50
    assert by_uid[3]["myExtension"] == {"kept": True}, "unknown fields survive"

    r = await client.post(f"/v1/lorebooks/{book_id}/entries", json={"key": ["gate"],
                                                                    "content": "A gate."})
    assert r.status_code == 201 and r.json()["uid"] == 4
    r = await client.post(f"/v1/lorebooks/{book_id}/entries", json={"uid": 4, "key": ["x"]})
    assert r.status_code == 409
    r = await client.patch(f"/v1/lorebooks/{book_id}/entries/3",
                           json={"content": "A ruined castle.", "ignoreBudget": True})
    assert r.status_code == 200, r.text
    assert r.json()["content"] == "A ruined castle." and r.json()["ignoreBudget"] is True
    assert r.json()["key"] == ["castle"] and r.json()["myExtension"] == {"kept": True}
    assert (await client.delete(f"/v1/lorebooks/{book_id}/entries/0")).status_code == 204
    assert (await client.get(f"/v1/lorebooks/{book_id}/entries/0")).status_code == 404

    r = await client.patch(f"/v1/lorebooks/{book_id}", json={"name": "Fort", "scan_depth": None,
                                                             "token_budget": 300})
    assert r.status_code == 200, r.text
    assert (r.json()["name"], r.json()["scan_depth"], r.json()["token_budget"]) == ("Fort", None, 300)
    assert [e["uid"] for e in r.json()["entries"]] == [3, 4]
    r = await client.patch(f"/v1/lorebooks/{book_id}", json={"entries": [wi_entry(9, ["a"], "b")]})
    assert [e["uid"] for e in r.json()["entries"]] == [9]

    listed = (await client.get("/v1/lorebooks")).json()["lorebooks"]
    assert [(b["id"], b["name"], b["entries"]) for b in listed] == [(book_id, "Fort", 1)]
    assert (await client.delete(f"/v1/lorebooks/{book_id}")).status_code == 204
    assert (await client.get(f"/v1/lorebooks/{book_id}")).status_code == 404


async def test_r8_2_world_info_file_imports_and_exports_unchanged_in_meaning(
    client: httpx.AsyncClient,
) -> None:
    raw = ELDORIA.read_bytes()
    r = await client.post("/v1/lorebooks/import", files={"file": ("st_Eldoria.json", raw)},
                          data={"name": "Eldoria"})
    assert r.status_code == 201, r.text
    assert r.json()["name"] == "Eldoria" and r.json()["entries"] == 4
    exported = await client.get(f"/v1/lorebooks/{r.json()['id']}/export")
    assert exported.status_code == 200
    assert "attachment" in exported.headers["content-disposition"]
    original = read_world_info(raw, name="Eldoria")
    assert read_world_info(exported.content) == original

    again = await client.post("/v1/lorebooks/import", json=json.loads(exported.content))
    assert again.status_code == 201, again.text
    second = await client.get(f"/v1/lorebooks/{again.json()['id']}/export")
    assert read_world_info(second.content) == original


async def test_r8_2_bad_lorebooks_are_refused_and_nothing_is_stored(
    client: httpx.AsyncClient, core: Core,
) -> None:
    bad_imports = [
        b"{not json", b"[1, 2]", b'{"spec": "chara_card_v2", "data": {}}',
        b'{"entries": {"0": {"key": {"a": 1}}}}', b'{"entries": {"0": {"key": ["a"], "order": NaN}}}',
    ]
    for body in bad_imports:
        r = await client.post("/v1/lorebooks/import", files={"file": ("x.json", body)})
        assert r.status_code == 422, (body, r.text)
        assert r.json()["error"]["code"] in ("import_invalid", "invalid_input")
    bad_books = [
        {"name": "", "entries": []},
        {"name": "x", "entries": [{"uid": -2**40, "key": ["a"]}]},
        {"name": "x", "entries": [{"uid": 2**40, "key": ["a"]}]},
        {"name": "x", "entries": [{"uid": 1}, {"uid": 1}]},
        {"name": "x", "entries": [{"key": [["nested"]]}]},
        {"name": "x", "scan_depth": -1},
        {"name": "x", "surprise": 1},
    ]
    for body in bad_books:
        r = await client.post("/v1/lorebooks", json=body)
        assert r.status_code == 422, (body, r.text)
    core.import_limits = Limits(max_input_bytes=4096, max_text_bytes=1024)
    r = await client.post("/v1/lorebooks/import",
                          files={"file": ("big.json", b'{"entries": {}, "x": "' + b"a" * 2000 + b'"}')})
    assert r.status_code == 413
    assert (await client.get("/v1/lorebooks")).json()["lorebooks"] == []

    book_id = await make_book(client, [wi_entry(0, ["a"], "b")])
    url = f"/v1/lorebooks/{book_id}/entries"
    for raw in (b'{"key": ["a"], "order": 1e400}', b'{"uid": "x"}', b'{"characterFilter": 5}',
                b'{"key": ["a"], "big": 123456789012345678901234567890}'):
        r = await client.post(url, content=raw, headers={"Content-Type": "application/json"})
        assert r.status_code == 422, (raw, r.text)
    assert (await client.patch(f"{url}/0", json={"uid": 7})).status_code == 422
    assert (await client.patch(f"{url}/99", json={"content": "x"})).status_code == 404
    r = await client.post(url, content=b'{"key": "x, y", "content": "nul\\u0000 \\ud800 end"}',
                          headers={"Content-Type": "application/json"})
    assert r.status_code == 201, r.text
    assert r.json()["key"] == ["x", "y"] and r.json()["content"] == "nul\ufffd \ufffd end"
    assert (await client.get(f"/v1/lorebooks/{book_id}")).json()["entry_count"] == 2


async def test_r8_2_guests_read_trusted_write_only_the_master_links_globally(
    client: httpx.AsyncClient,
) -> None:
    guest = {"Authorization": f"Bearer {await make_user(client, 'guest')}"}
    trusted = {"Authorization": f"Bearer {await make_user(client, 'trusted')}"}
    r = await client.post("/v1/lorebooks", json={"name": "T", "entries": []}, headers=guest)
    assert r.status_code == 403
    r = await client.post("/v1/lorebooks", json={"name": "T", "entries": []}, headers=trusted)
    assert r.status_code == 201
    book_id = r.json()["id"]
    assert (await client.get(f"/v1/lorebooks/{book_id}", headers=guest)).status_code == 200
    r = await client.post(f"/v1/lorebooks/{book_id}/links", json={"target_kind": "global"},
                          headers=trusted)
    assert r.status_code == 403
    own_chat = (await client.post("/v1/chats", json={}, headers=trusted)).json()["id"]
    master_chat = await make_chat(client)
    r = await client.post(f"/v1/lorebooks/{book_id}/links",
                          json={"target_kind": "chat", "target_id": master_chat}, headers=trusted)
    assert r.status_code == 404, "someone else's chat is invisible"
    r = await client.post(f"/v1/lorebooks/{book_id}/links",
                          json={"target_kind": "chat", "target_id": own_chat}, headers=trusted)
    assert r.status_code == 201
    assert (await client.get(f"/v1/chats/{own_chat}", headers=trusted)).json()["lorebook_ids"] == [book_id]
    r = await client.post(f"/v1/lorebooks/{book_id}/links", json={"target_kind": "global"})
    assert r.status_code == 201
    links = (await client.get(f"/v1/lorebooks/{book_id}/links")).json()["links"]
    assert links == [{"target_kind": "chat", "target_id": own_chat},
                     {"target_kind": "global", "target_id": None}]
    r = await client.post(f"/v1/lorebooks/{book_id}/links", json={"target_kind": "persona"})
    assert r.status_code == 422
    assert (await client.delete(f"/v1/lorebooks/{book_id}/links/global", headers=trusted)).status_code == 403
    assert (await client.delete(f"/v1/lorebooks/{book_id}/links/global")).status_code == 204
    r = await client.delete(f"/v1/lorebooks/{book_id}/links/chat/{own_chat}", headers=trusted)
    assert r.status_code == 204
    assert (await client.get(f"/v1/lorebooks/{book_id}/links")).json()["links"] == []


async def test_r13_world_info_settings_use_sillytavern_names_and_are_validated(
    client: httpx.AsyncClient,
) -> None:
    r = await client.get("/v1/settings")
    assert r.status_code == 200 and r.json()["world_info"]["depth"] == 2
    r = await client.patch("/v1/settings", json={"world_info": {
        "world_info_depth": 6, "budget": 40, "recursive": True, "character_strategy": "global_first"}})
    assert r.status_code == 200, r.text
    wi = r.json()["world_info"]
    assert (wi["depth"], wi["budget"], wi["recursive"], wi["character_strategy"]) == (
        6, 40, True, "global_first")
    for bad in ({"depth": "deep"}, {"depth": -1}, {"budget": 250}, {"recursive": "yes"},
                {"character_strategy": "random"}, {"no_such_setting": 1}):
        r = await client.patch("/v1/settings", json={"world_info": bad})
        assert r.status_code == 422, (bad, r.text)
    assert (await client.patch("/v1/settings", json={"other": {}})).status_code == 422
    assert (await client.get("/v1/settings")).json()["world_info"]["depth"] == 6
    r = await client.patch("/v1/settings", json={"world_info": {"depth": None}})
    assert r.json()["world_info"]["depth"] == 2 and r.json()["world_info"]["budget"] == 40
    trusted = {"Authorization": f"Bearer {await make_user(client, 'trusted')}"}
    assert (await client.get("/v1/settings", headers=trusted)).status_code == 403
