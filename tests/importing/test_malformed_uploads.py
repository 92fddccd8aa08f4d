"""R8.2 / §13: a malformed, oversized or unsupported upload gets a 4xx with the error body and
stores nothing (row counts of every table unchanged)."""

from __future__ import annotations

import base64
import io
import json
import zipfile

import httpx
import pytest

from evacore.core import Core
from evacore.formats.limits import Limits
from tests.formats._build import b64json, charx, chunk, png_with, text, tiny_image, v3_card
from tests.importing._util import CARDS, row_counts

SMALL = Limits(max_input_bytes=300_000, max_text_bytes=64_000, max_zip_entries=8,
               max_zip_total_bytes=200_000, max_json_depth=32)
CARD = json.dumps(v3_card(character_book={"entries": [{"keys": ["k"], "content": "c"}]}))


def _escaping_zip() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("card.json", CARD)
        archive.writestr(zipfile.ZipInfo("../evil.txt"), b"evil")
    return out.getvalue()


def _bad_book() -> bytes:
    card = v3_card(character_book={"entries": [{"keys": [{"nested": 1}], "content": "c"}]})
    return json.dumps(card).encode()


CARD_CASES: list[tuple[str, bytes, int]] = [
    ("truncated png", CARDS[0].read_bytes()[:5000], 422),
    ("bad crc", png_with(chunk(b"tEXt", b"ccv3\x00" + b64json(v3_card()), crc=1)), 422),
    ("bad base64", png_with(text("chara", b"not*base64!")), 422),
    ("non-UTF-8 JSON", '{"name": "Caf\xe9"}'.encode("latin-1"), 422),
    ("oversized chunk", png_with(text("ccv3", b"A" * 70_000)), 413),
    ("oversized file", b"{" + b" " * 310_000 + b"}", 413),
    ("zip bomb", charx({"card.json": CARD.encode(), "pad.bin": b"\x00" * 250_000}), 413),
    ("../ entry", _escaping_zip(), 422),
    ("deep JSON", b'{"name": "x", "a": ' + b"[" * 40 + b"]" * 40 + b"}", 422),
    ("unknown kind", b"GIF89a\x01\x00\x01\x00", 415),
    ("world info, not a card", b'{"entries": {}}', 422),
    ("plain png", tiny_image(), 422),
    ("book with a bad key", _bad_book(), 422),
    ("empty", b"", 422),
    ("a book past the text limit", png_with(text("ccv3", base64.b64encode(json.dumps(v3_card(
        character_book={"entries": [{"keys": [f"k{i}"], "content": "x" * 100}
                                    for i in range(400)]})).encode()))), 413),
]


@pytest.fixture
def small_limits(core: Core) -> Limits:
    core.import_limits = SMALL
    return SMALL


async def test_r8_2_malformed_cards_get_4xx_and_store_nothing(
        client: httpx.AsyncClient, core: Core, small_limits: Limits) -> None:
    await client.post("/v1/characters", files={"file": ("ok.json", CARD.encode())})
    before = await row_counts(core)
    assert before["characters"] == 1 and before["lore_entries"] == 1
    for label, content, status in CARD_CASES:
        r = await client.post("/v1/characters", files={"file": ("upload.bin", content)})
        assert r.status_code == status, (label, r.text)
        assert set(r.json()["error"]) >= {"code", "message"}, label
        r = await client.post("/v1/characters", content=content,
                              headers={"Content-Type": "application/json"})
        assert 400 <= r.status_code < 500, (label, r.text)
    assert await row_counts(core) == before


async def test_r8_2_wrong_requests_get_4xx(client: httpx.AsyncClient, core: Core,
                                           small_limits: Limits) -> None:
    before = await row_counts(core)
    card = json.dumps(v3_card()).encode()
    cases = [
        ("/v1/characters", {"content": card, "headers": {"Content-Type": "text/plain"}}, 415),
        ("/v1/characters", {"files": {"other": ("x.json", card)}}, 400),
        ("/v1/characters", {"content": b"--x\r\nbroken",
                            "headers": {"Content-Type": "multipart/form-data; boundary=x"}},
         400),
        ("/v1/characters", {"content": b"", "headers": {
            "Content-Type": "multipart/form-data"}}, 400),
        ("/v1/presets/import", {"json": {"name": "x"}}, 415),
        ("/v1/chats/import", {"content": b"{}", "headers": {"Content-Type": "application/json"}},
         415),
        ("/v1/characters", {"content": b"x" * 600_000, "headers": {
            "Content-Type": "multipart/form-data; boundary=x"}}, 413),
    ]
    for url, kwargs, status in cases:
        r = await client.post(url, **kwargs)
        assert r.status_code == status, (url, kwargs.get("headers"), r.text)
        assert "error" in r.json()
    assert await row_counts(core) == before


async def test_r8_2_malformed_presets_and_chats_store_nothing(
        client: httpx.AsyncClient, core: Core, small_limits: Limits) -> None:
    before = await row_counts(core)
    preset_cases = [
        b'{"name": "x", "input_sequence": 5, "output_sequence": ""}',
        b'{"hello": "world"}',
        b"[1, 2]",
        (b'{"instruct": {"name": "ok", "input_sequence": "a", "output_sequence": "b"}, '
         b'"context": {"name": "broken"}}'),
        b'{"name": "x", "story_string": "s", ' + b'"a": ' + b"[" * 40 + b"]" * 40 + b"}",
        "{\"name\": \"Caf\xe9\", \"content\": \"x\"}".encode("latin-1"),
    ]
    for content in preset_cases:
        r = await client.post("/v1/presets/import", files={"file": ("p.json", content)})
        assert r.status_code == 422, (content[:60], r.text)
    header = b'{"user_name": "U", "character_name": "C"}\n'
    chat_cases = [
        (header + b'{"name": "U", "is_user": true, "mes": "hi"\n', 422),
        (header + b'{"name": "U", "is_user": true, "mes": "hi", "extra": 3}', 422),
        (header + b"[1]", 422),
        (b"", 422),
        ("\ufeff{\"mes\": \"caf\xe9\"}".encode("latin-1", "replace"), 422),
        (header + b'{"mes": "x", "a": ' + b"[" * 40 + b"]" * 40 + b"}", 422),
        (header + b'{"mes": "' + b"y" * 320_000 + b'"}', 413),
    ]
    for content, status in chat_cases:
        r = await client.post("/v1/chats/import", files={"file": ("c.jsonl", content)})
        assert r.status_code == status, (content[:60], r.text)
    r = await client.post("/v1/chats/import",
                          files={"file": ("c.jsonl", header + b'{"mes": "x"}')},
                          data={"character_id": "nope"})
    assert r.status_code == 422
    assert await row_counts(core) == before


async def test_r8_2_odd_but_valid_text_is_stored_on_every_backend(
        client: httpx.AsyncClient) -> None:
    """NUL characters and astral-plane text: fine in JSON columns, replaced in text columns."""
    card = v3_card(name="Nul\u0000Name", description="a\u0000b \U0001f319",
                   character_book={"entries": [{"keys": ["k\u0000"], "content": "c\u0000"}]})
    r = await client.post("/v1/characters", files={"file": ("c.json", json.dumps(card).encode())})
    assert r.status_code == 201, r.text
    assert r.json()["name"] == "NulName" and r.json()["data"]["description"] == "a\u0000b \U0001f319"
    header = {"user_name": "U\u0000", "character_name": "C", "chat_metadata": {"x": "\u0000"}}
    lines = [header, {"name": "C\u0000", "is_user": False, "mes": "hi\u0000there",
                      "extra": {"note": "\u0000"}}]
    body = "\n".join(json.dumps(line) for line in lines).encode()
    r = await client.post("/v1/chats/import", files={"file": ("c.jsonl", body)})
    assert r.status_code == 201, r.text
    assert r.json()["warnings"]
    msgs = (await client.get(f"/v1/chats/{r.json()['id']}/messages")).json()["messages"]
    assert msgs[0]["content"] == "hi\ufffdthere" and msgs[0]["name"] == "C\ufffd"
    exported = (await client.get(f"/v1/chats/{r.json()['id']}/export")).content
    assert json.loads(exported.split(b"\n")[0])["chat_metadata"] == {"x": "\u0000"}
