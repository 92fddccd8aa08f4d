"""R2.4 with real files: Eldoria (ST World Info) and the books embedded in fixture cards
import, activate on matching chats, and survive export round trips."""

from __future__ import annotations

import base64
import dataclasses
import json
import struct
from pathlib import Path
from typing import Any

import pytest
from lore_helpers import book, chat, run, uids

from evacore.formats.worldinfo import (
    from_character_book,
    read_world_info,
    to_character_book,
    write_world_info,
)
from evacore.lore import (
    Lorebook,
    LoreEntry,
    Position,
    SelectiveLogic,
    SourcedBook,
    WorldInfoSettings,
)
from tests.helpers import FIXTURES  # noqa: E402,I001

CARDS_WITH_BOOKS = ["st_default_Seraphina.v2.png", "st_content_Sakana.v2-characterbook.png"]


def card_json(path: Path) -> dict[str, Any]:
    """Minimal PNG tEXt walker for tests: prefer `ccv3`, else `chara`."""
    data = path.read_bytes()
    pos, found = 8, {}
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"tEXt":
            key, _, value = body.partition(b"\0")
            found.setdefault(key.decode("latin-1").lower(), value)
        if kind == b"IEND":
            break
    return json.loads(base64.b64decode(found.get("ccv3") or found["chara"]))


def meaning(e: LoreEntry) -> dict[str, Any]:
    d = dataclasses.asdict(e)
    for display_only in ("extra", "add_memo", "display_index"):
        d.pop(display_only)
    return d


def card_book(name: str) -> Lorebook:
    return from_character_book(card_json(FIXTURES / "cards" / name)["data"]["character_book"])


def test_r2_4_eldoria_imports_with_defaults() -> None:
    b = read_world_info((FIXTURES / "worldinfo/st_Eldoria.json").read_bytes(), name="Eldoria")
    assert [e.uid for e in b.entries] == [0, 1, 2, 3]
    first = b.entries[0]
    assert first.keys == ("eldoria", "wood", "forest", "magical forest")
    assert first.selective is False and first.position is Position.BEFORE_CHAR
    assert (first.probability, first.depth, first.group_weight) == (100, 4, 100)


def test_r2_4_eldoria_activates_on_matching_chat() -> None:
    b = read_world_info((FIXTURES / "worldinfo/st_Eldoria.json").read_bytes(), name="Eldoria")
    r = run(b, chat("Hello?", "Welcome, traveler.", "What lurks in these woods? Beasts?"))
    assert sorted(uids(r)) == [0, 1]
    assert r.activated[0].content.startswith('{{user}}: "What')
    magic = run(b, chat("Hi", "Hello", "Is that magic?"), macros=lambda s: s.replace("{{char}}", "Seraphina"))
    assert uids(magic) == [3] and "{{char}}" not in magic.activated[0].content


def test_r2_4_eldoria_round_trips_through_export() -> None:
    b = read_world_info((FIXTURES / "worldinfo/st_Eldoria.json").read_bytes(), name="Eldoria")
    assert read_world_info(write_world_info(b)) == b
    via_card = from_character_book(to_character_book(b))
    assert [meaning(e) for e in via_card.entries] == [meaning(e) for e in b.entries]


@pytest.mark.parametrize("name", CARDS_WITH_BOOKS)
def test_r2_4_card_book_round_trips_unchanged_in_meaning(name: str) -> None:
    b = card_book(name)
    again = from_character_book(to_character_book(b))
    assert [meaning(e) for e in again.entries] == [meaning(e) for e in b.entries]
    assert read_world_info(write_world_info(b)) == b
    reread = read_world_info(json.dumps(to_character_book(b)))
    assert [meaning(e) for e in reread.entries] == [meaning(e) for e in b.entries]


def test_r2_4_seraphina_book_matches_eldoria_file() -> None:
    from_card = card_book("st_default_Seraphina.v2.png")
    from_file = read_world_info((FIXTURES / "worldinfo/st_Eldoria.json").read_bytes(), name="Eldoria")
    assert from_card.name == "Eldoria"
    assert [(e.keys, e.content, e.position) for e in from_card.entries] == [
        (e.keys, e.content, e.position) for e in from_file.entries]
    assert sorted(uids(run(from_card, "the forest glade"))) == [0, 2]


def test_r2_4_sakana_book_keeps_st_extensions_and_activates() -> None:
    b = card_book("st_content_Sakana.v2-characterbook.png")
    assert b.name == "Sakana-WI" and len(b.entries) == 14
    assert all(e.position is Position.AFTER_CHAR for e in b.entries)
    assert all(e.selective_logic is SelectiveLogic.AND_ANY for e in b.entries)
    r = run(SourcedBook(b, "character"), chat("hey", "yo", "Can you write a script for me?"))
    assert {0, 2} <= set(uids(r))
    assert all(a.position is Position.AFTER_CHAR for a in r.activated)
    # entry 12 needs a secondary key ("your hand") besides its primary one
    held = run(b, "I hold your hand", settings=WorldInfoSettings(depth=1))
    assert 12 in uids(held)
    assert 12 not in uids(run(b, "I hold the cup", settings=WorldInfoSettings(depth=1)))


def test_r2_4_card_and_world_books_scan_together() -> None:
    eldoria = card_book("st_default_Seraphina.v2.png")
    sakana = card_book("st_content_Sakana.v2-characterbook.png")
    r = run([SourcedBook(eldoria, "character"), SourcedBook(sakana, "global"), book()],
            "write a poem about the forest")
    assert {a.book_name for a in r.activated} == {"Eldoria", "Sakana-WI"}
