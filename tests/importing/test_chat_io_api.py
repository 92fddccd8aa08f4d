"""R8.2 / §13: SillyTavern chat JSONL over HTTP — import (swipes as variants, hidden flags, dates,
variables, author's note), export, and a re-import of the export gives an equal chat."""

from __future__ import annotations

import json

import httpx
import pytest

from evacore.formats.st_chat import read_st_chat
from tests.conftest import make_user
from tests.formats._build import v3_card
from tests.helpers import FIXTURES
from tests.importing._util import CHATS, upload

HEADER = {
    "user_name": "Kit", "character_name": "Nova", "create_date": "2024-09-28@01h02m03s",
    "chat_metadata": {
        "variables": {"score": 3, "mood": "calm"}, "note_prompt": "Stay in character.",
        "note_depth": 2, "note_interval": 3, "note_role": 1, "note_position": 1,
        "world_info": "Atlas", "integrity": "0b6c0c7e", "tainted": True,
    },
}
LINES = [
    {"name": "Nova", "is_user": False, "send_date": "June 19, 2023 2:20pm", "mes": "Hi there.",
     "swipes": ["Hi there.", "Hello!", "Hey."], "swipe_id": 0, "swipe_info": [],
     "extra": {}},
    {"name": "Kit", "is_user": True, "is_system": False, "send_date": 1687184460000,
     "mes": "Tell me a story.", "extra": {"token_count": 5}, "force_avatar": "kit.png"},
    {"name": "Nova", "is_user": False, "send_date": "2023-06-19T14:22:00.000Z",
     "mes": "Second take.", "swipes": ["First take.", "Second take.", "Third."], "swipe_id": 1,
     "swipe_info": [
         {"send_date": "2023-06-19T14:21:00.000Z", "gen_started": "2023-06-19T14:20:58.000Z",
          "gen_finished": "2023-06-19T14:21:00.000Z", "extra": {"model": "m-1"}},
         {"send_date": "2023-06-19T14:22:00.000Z", "extra": {"model": "m-2",
                                                             "reasoning": "hmm"}}],
     "gen_started": "2023-06-19T14:21:58.000Z", "gen_finished": "2023-06-19T14:22:00.000Z",
     "extra": {"api": "openai", "model": "m-2", "reasoning": "hmm"}, "title": ""},
    {"name": "Kit", "is_user": True, "is_system": True, "send_date": "not a date",
     "mes": "(hidden note)", "extra": {}},
    {"name": "System", "is_user": False, "is_system": False, "mes": "The lights flicker.",
     "send_date": "2023-6-19 @14h 25m 00s 000ms", "extra": {"type": "narrator"}},
    {"name": "Nova", "is_user": False, "send_date": "June 19, 2023 2:26pm",
     "mes": "Once upon a time\u2026 \U0001f319", "is_name": True, "extra": {"gen_id": 77}},
]


def _jsonl(header: dict | None, lines: list[dict]) -> bytes:
    rows = ([header] if header is not None else []) + lines
    return "\n".join(json.dumps(r, ensure_ascii=False) for r in rows).encode()


async def _messages(client: httpx.AsyncClient, chat_id: str) -> list[dict]:
    msgs = (await client.get(f"/v1/chats/{chat_id}/messages")).json()["messages"]
    keep = ("role", "name", "content", "hidden", "created_at")
    return [{**{k: m[k] for k in keep},
             "variants": [v["content"] for v in m["variants"]],
             "active": next((i for i, v in enumerate(m["variants"])
                             if v["id"] == m["active_variant"]), None)} for m in msgs]


async def test_r8_2_fixture_chats_import_and_export_byte_for_byte(
        client: httpx.AsyncClient) -> None:
    if not CHATS:
        pytest.skip(f"no fixture chats in {FIXTURES / 'chats'}")  # CI requires them
    for path in CHATS:
        raw = path.read_bytes()
        chat = (await upload(client, "/v1/chats/import", raw, path.name)).json()
        assert chat["messages"] == len(read_st_chat(raw).messages)
        r = await client.get(f"/v1/chats/{chat['id']}/export", params={"format": "jsonl"})
        assert r.status_code == 200
        assert r.headers["content-disposition"].endswith('.jsonl')
        assert r.content == raw, path.name


async def test_r8_2_chat_import_maps_swipes_hidden_dates_variables_and_note(
        client: httpx.AsyncClient) -> None:
    chat = (await upload(client, "/v1/chats/import", _jsonl(HEADER, LINES), "c.jsonl")).json()
    assert chat["title"] == "Nova" and chat["variables"] == {"score": 3, "mood": "calm"}
    assert chat["settings"]["authors_note"] == {"text": "Stay in character.", "depth": 2,
                                                "interval": 3, "role": "user",
                                                "position": "in_chat"}
    assert chat["connection_id"] and chat["turn"] == 3
    msgs = await _messages(client, chat["id"])
    assert [m["role"] for m in msgs] == ["assistant", "user", "assistant", "user", "system",
                                         "assistant"]
    assert msgs[0]["variants"] == ["Hi there.", "Hello!", "Hey."] and msgs[0]["active"] == 0
    assert msgs[2]["variants"] == ["First take.", "Second take.", "Third."]
    assert msgs[2]["active"] == 1 and msgs[2]["content"] == "Second take."
    assert [m["hidden"] for m in msgs] == [False, False, False, True, False, False]
    assert msgs[1]["variants"] == [] and msgs[1]["content"] == "Tell me a story."
    assert msgs[5]["variants"] == ["Once upon a time\u2026 \U0001f319"]
    assert msgs[1]["created_at"].startswith("2023-06-19T14:21:00")
    assert msgs[0]["created_at"].startswith("2023-06-19T14:20:00")


async def test_r8_2_exported_chat_reimports_equal(client: httpx.AsyncClient) -> None:
    original = _jsonl(HEADER, LINES)
    first = (await upload(client, "/v1/chats/import", original, "c.jsonl")).json()
    exported = (await client.get(f"/v1/chats/{first['id']}/export")).content
    assert read_st_chat(exported) == read_st_chat(original)
    second = (await upload(client, "/v1/chats/import", exported, "again.jsonl")).json()
    assert await _messages(client, second["id"]) == await _messages(client, first["id"])
    for key in ("title", "variables", "settings", "turn"):
        assert second[key] == first[key], key
    headerless = _jsonl(None, LINES[1:3])
    chat = (await upload(client, "/v1/chats/import", headerless, "group.jsonl")).json()
    again = (await client.get(f"/v1/chats/{chat['id']}/export")).content
    assert read_st_chat(again) == read_st_chat(headerless)
    assert not read_st_chat(again).has_header


async def test_r8_2_edits_after_import_show_in_the_export(client: httpx.AsyncClient) -> None:
    chat = (await upload(client, "/v1/chats/import", _jsonl(HEADER, LINES), "c.jsonl")).json()
    note = {**chat["settings"]["authors_note"], "text": "Be brief.", "position": "top"}
    r = await client.patch(f"/v1/chats/{chat['id']}", json={"settings": {"authors_note": note}})
    assert r.status_code == 200
    msgs = (await client.get(f"/v1/chats/{chat['id']}/messages")).json()["messages"]
    third = msgs[2]
    await client.patch(f"/v1/chats/{chat['id']}/messages/{third['id']}",
                       json={"active_variant": third["variants"][2]["id"]})
    st = read_st_chat((await client.get(f"/v1/chats/{chat['id']}/export")).content)
    meta = st.header["chat_metadata"]
    assert (meta["note_prompt"], meta["note_position"], meta["note_depth"]) == ("Be brief.", 2, 2)
    assert meta["variables"] == {"score": 3, "mood": "calm"}
    assert (st.messages[2].active_index, st.messages[2].content) == (2, "Third.")


async def test_r8_2_native_chat_exports_and_reimports(client: httpx.AsyncClient) -> None:
    card = json.dumps(v3_card(name="Echo", first_mes="Welcome.")).encode()
    character = (await upload(client, "/v1/characters", card, "echo.json")).json()
    chat = (await client.post("/v1/chats", json={"character_id": character["id"]})).json()
    r = await client.post(f"/v1/chats/{chat['id']}/generate",
                          json={"message": {"content": "ping"}, "stream": False})
    assert r.status_code == 200, r.text
    exported = (await client.get(f"/v1/chats/{chat['id']}/export")).content
    st = read_st_chat(exported)
    assert (st.user_name, st.character_name) == ("User", "Echo")
    assert [m.content for m in st.messages][:2] == ["Welcome.", "ping"]
    again = (await upload(client, "/v1/chats/import", exported, "echo.jsonl",
                          character_id=character["id"])).json()
    assert again["character_id"] == character["id"]
    first = await _messages(client, chat["id"])
    second = await _messages(client, again["id"])
    assert [(m["role"], m["content"]) for m in second] == [(m["role"], m["content"])
                                                            for m in first]


async def test_r8_2_chat_export_follows_ownership(client: httpx.AsyncClient) -> None:
    guest = {"Authorization": f"Bearer {await make_user(client, 'guest')}"}
    chat = (await upload(client, "/v1/chats/import", _jsonl(HEADER, LINES), "c.jsonl")).json()
    assert (await client.get(f"/v1/chats/{chat['id']}/export", headers=guest)).status_code == 404
    r = await client.post("/v1/chats/import", files={"file": ("c.jsonl", _jsonl(HEADER, LINES))},
                          headers=guest)
    assert r.status_code == 403


async def test_a_native_chat_exports_dates_and_fields_as_sillytavern_writes_them(
    client: httpx.AsyncClient,
) -> None:
    import re

    r = await client.post("/v1/chats", json={})
    chat_id = r.json()["id"]
    r = await client.post(f"/v1/chats/{chat_id}/generate",
                          json={"message": {"content": "hello"}, "stream": False})
    assert r.status_code == 200, r.text
    r = await client.get(f"/v1/chats/{chat_id}/export")
    assert r.status_code == 200, r.text
    header, *lines = [json.loads(line) for line in r.text.split("\n")]
    # SillyTavern's forms: humanized create_date, long send_date; it cannot parse ISO here
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}@\d{2}h\d{2}m\d{2}s", header["create_date"])
    for line in lines:
        assert re.fullmatch(r"[A-Z][a-z]+ \d{1,2}, \d{4} \d{1,2}:\d{2}[ap]m", line["send_date"])
        # SillyTavern always writes both
        assert line["is_system"] is False and isinstance(line["extra"], dict)
    chat = read_st_chat(r.content)
    assert [m.content for m in chat.messages][-2:] == ["hello", lines[-1]["mes"]]


def test_sillytavern_local_time_dates_are_read_in_local_time() -> None:
    import os
    import time
    from datetime import UTC, datetime

    from evacore.formats.st_chat import parse_st_date

    old = os.environ.get("TZ")
    os.environ["TZ"] = "Asia/Tokyo"  # UTC+9, no daylight saving
    time.tzset()
    try:
        assert parse_st_date("June 19, 2023 2:20pm") == datetime(2023, 6, 19, 5, 20, tzinfo=UTC)
        assert parse_st_date("2023-06-19@14h20m33s") == datetime(2023, 6, 19, 5, 20, 33,
                                                                 tzinfo=UTC)
        # ISO and epoch values carry their own zone
        assert parse_st_date("2023-06-19T14:20:00.000Z") == datetime(2023, 6, 19, 14, 20,
                                                                     tzinfo=UTC)
    finally:
        if old is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = old
        time.tzset()
