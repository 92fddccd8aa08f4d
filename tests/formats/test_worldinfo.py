"""R2.4 / formats §2: ST World Info files, lorebook_v3 and card character books ⇄ Lorebook."""

from __future__ import annotations

import dataclasses
import json

import pytest

from evacore.errors import ImportInvalid
from evacore.formats.worldinfo import (
    from_character_book,
    read_world_info,
    to_character_book,
    write_world_info,
)
from evacore.lore import CharacterFilter, Lorebook, LoreEntry, Position, Role, SelectiveLogic
from tests.helpers import FIXTURES

ELDORIA = FIXTURES / "worldinfo" / "st_Eldoria.json"

FULL_ST_ENTRY = {
    "uid": 7, "key": ["dragon", "/wyrm/i"], "keysecondary": ["gold"], "comment": "Dragons",
    "content": "Dragons hoard gold.", "constant": True, "vectorized": True, "selective": False,
    "selectiveLogic": 3, "addMemo": True, "order": 250, "position": 4, "disable": True,
    "excludeRecursion": True, "preventRecursion": True, "delayUntilRecursion": 2,
    "probability": 35, "useProbability": False, "depth": 6, "role": 2, "group": "beasts,big",
    "groupOverride": True, "groupWeight": 40, "useGroupScoring": True, "scanDepth": 9,
    "caseSensitive": True, "matchWholeWords": False, "matchPersonaDescription": True,
    "matchCharacterDescription": True, "matchCharacterPersonality": True,
    "matchCharacterDepthPrompt": True, "matchScenario": True, "matchCreatorNotes": True,
    "automationId": "auto-1", "sticky": 3, "cooldown": 4, "delay": 5, "displayIndex": 12,
    "triggers": ["normal", "swipe"],
    "characterFilter": {"isExclude": True, "names": ["eva"], "tags": ["t1"]},
    "outletName": "lore", "ignoreBudget": True, "customField": {"kept": [1, 2]},
}

EXPECTED = LoreEntry(
    uid=7, keys=("dragon", "/wyrm/i"), secondary_keys=("gold",), comment="Dragons",
    content="Dragons hoard gold.", constant=True, vectorized=True, selective=False,
    selective_logic=SelectiveLogic.AND_ALL, add_memo=True, order=250, position=Position.AT_DEPTH,
    disable=True, exclude_recursion=True, prevent_recursion=True, delay_until_recursion=2,
    probability=35, use_probability=False, depth=6, role=Role.ASSISTANT, group="beasts,big",
    group_override=True, group_weight=40, use_group_scoring=True, scan_depth=9,
    case_sensitive=True, match_whole_words=False, match_persona_description=True,
    match_character_description=True, match_character_personality=True,
    match_character_depth_prompt=True, match_scenario=True, match_creator_notes=True,
    automation_id="auto-1", sticky=3, cooldown=4, delay=5, display_index=12,
    triggers=("normal", "swipe"),
    character_filter=CharacterFilter(names=("eva",), tags=("t1",), is_exclude=True),
    outlet_name="lore", mandatory=True, extra={"customField": {"kept": [1, 2]}},
)


def test_r2_4_read_every_st_entry_field() -> None:
    b = read_world_info({"entries": {"7": FULL_ST_ENTRY}}, name="Beasts")
    assert b.name == "Beasts" and b.entries == (EXPECTED,)


def test_r2_4_write_uses_st_names_and_keeps_unknown_fields() -> None:
    doc = json.loads(write_world_info(Lorebook(name="Beasts", entries=(EXPECTED,))))
    written = doc["entries"]["7"]
    assert written == FULL_ST_ENTRY
    assert doc["name"] == "Beasts"


def test_r2_4_st_file_round_trip_is_equal() -> None:
    raw = {"entries": {"7": FULL_ST_ENTRY}, "originalData": {"name": "x", "entries": []},
           "scan_depth": 3, "token_budget": 500, "recursive_scanning": False, "futureKey": 1}
    b = read_world_info(json.dumps(raw).encode(), name="Beasts")
    assert (b.scan_depth, b.token_budget, b.recursive_scanning) == (3, 500, False)
    assert b.extra == {"originalData": {"name": "x", "entries": []}, "futureKey": 1}
    again = read_world_info(write_world_info(b))
    assert again == b


def test_r2_4_eldoria_legacy_file_gets_defaults() -> None:
    b = read_world_info(ELDORIA.read_bytes(), name="Eldoria")
    e = b.entries[1]
    assert e.uid == 1 and e.keys[0] == "shadowfang" and e.secondary_keys == ()
    assert (e.order, e.position, e.depth, e.role, e.probability) == (100, Position.BEFORE_CHAR, 4, Role.SYSTEM, 100)
    assert e.display_index == 1 and e.extra == {}
    assert read_world_info(write_world_info(b)) == b


def test_r2_4_lorebook_v3_object() -> None:
    obj = {"spec": "lorebook_v3", "data": {
        "name": "V3", "scan_depth": 4, "token_budget": 200, "recursive_scanning": True,
        "extensions": {"x": 1},
        "entries": [{"keys": ["a"], "content": "A", "extensions": {}, "enabled": True,
                     "insertion_order": 5, "use_regex": False, "id": "alpha"}],
    }}
    b = read_world_info(obj)
    assert (b.name, b.scan_depth, b.token_budget, b.recursive_scanning) == ("V3", 4, 200, True)
    assert b.extensions == {"x": 1}
    e = b.entries[0]
    assert (e.uid, e.order, e.position) == (0, 5, Position.AFTER_CHAR)
    assert e.extra == {"use_regex": False, "id": "alpha"}
    card = to_character_book(b)
    assert card["entries"][0]["id"] == "alpha" and card["entries"][0]["use_regex"] is False
    assert card["scan_depth"] == 4 and card["extensions"] == {"x": 1}


def test_r2_4_bare_book_with_entries_array() -> None:
    b = read_world_info(b'{"name": "Bare", "entries": [{"keys": "a, b", "content": "x"}]}')
    assert b.name == "Bare" and b.entries[0].keys == ("a", "b")


def test_r2_4_st_entries_as_array_are_recognised() -> None:
    b = read_world_info({"entries": [{"uid": 3, "key": ["k"], "content": "c"}]})
    assert b.entries[0].keys == ("k",) and b.entries[0].uid == 0


def test_r2_4_character_book_maps_st_extensions() -> None:
    card = {"name": "Card", "entries": [
        {"id": 4, "keys": ["k"], "secondary_keys": ["s"], "comment": "note", "content": "c",
         "constant": True, "selective": True, "insertion_order": 30, "enabled": False,
         "position": "before_char", "case_sensitive": True, "name": "entry-name", "priority": 3,
         "extensions": {"position": 4, "depth": 2, "role": 1, "exclude_recursion": True,
                        "prevent_recursion": True, "delay_until_recursion": 1,
                        "display_index": 9, "probability": 60, "useProbability": True,
                        "selectiveLogic": 2, "group": "g", "group_override": True,
                        "group_weight": 7, "scan_depth": 3, "match_whole_words": True,
                        "use_group_scoring": True, "automation_id": "a", "vectorized": True,
                        "sticky": 2, "cooldown": 3, "delay": 4, "ignore_budget": True,
                        "triggers": ["quiet"], "outlet_name": "o", "match_scenario": True,
                        "third_party": {"v": 1}}},
    ]}
    e = from_character_book(card).entries[0]
    assert (e.uid, e.keys, e.secondary_keys, e.comment, e.add_memo) == (4, ("k",), ("s",), "note", True)
    assert (e.constant, e.selective, e.order, e.disable) == (True, True, 30, True)
    assert (e.position, e.depth, e.role) == (Position.AT_DEPTH, 2, Role.USER)
    assert (e.exclude_recursion, e.prevent_recursion, e.delay_until_recursion) == (True, True, 1)
    assert (e.display_index, e.probability, e.selective_logic) == (9, 60, SelectiveLogic.NOT_ANY)
    assert (e.group, e.group_override, e.group_weight, e.use_group_scoring) == ("g", True, 7, True)
    assert (e.scan_depth, e.match_whole_words, e.case_sensitive) == (3, True, True)
    assert (e.automation_id, e.vectorized, e.sticky, e.cooldown, e.delay) == ("a", True, 2, 3, 4)
    assert (e.mandatory, e.triggers, e.outlet_name, e.match_scenario) == (True, ("quiet",), "o", True)
    # the card's top-level case_sensitive is kept to be written back where it was
    assert e.extra == {"name": "entry-name", "priority": 3, "case_sensitive": True,
                       "extensions": {"third_party": {"v": 1}}}


def test_r2_4_character_book_defaults_and_position_fallback() -> None:
    card = {"entries": [
        {"keys": ["a"], "content": "A", "position": "before_char",
         "extensions": {"probability": None, "useProbability": False}},
        {"keys": ["b"], "content": "B", "id": 0},
        {"keys": ["c"], "content": "C"},
    ]}
    b = from_character_book(card)
    a, bb, _ = b.entries
    assert a.position is Position.BEFORE_CHAR and bb.position is Position.AFTER_CHAR
    assert (a.probability, a.use_probability) == (100, False)
    assert a.selective is False and a.disable is False and a.order == 100
    assert sorted(e.uid for e in b.entries) == [0, 1, 2]  # missing ids never collide
    assert bb.uid == 0


def test_r2_4_to_character_book_follows_st_export() -> None:
    card = to_character_book(Lorebook(name="Beasts", entries=(EXPECTED,)))
    assert card["name"] == "Beasts" and card["extensions"] == {}
    e = card["entries"][0]
    assert (e["id"], e["keys"], e["secondary_keys"], e["insertion_order"], e["enabled"]) == (
        7, ["dragon", "/wyrm/i"], ["gold"], 250, False)
    assert e["position"] == "after_char" and e["use_regex"] is True
    ext = e["extensions"]
    assert (ext["position"], ext["depth"], ext["role"], ext["selectiveLogic"]) == (4, 6, 2, 3)
    assert (ext["ignore_budget"], ext["useProbability"], ext["display_index"]) == (True, False, 12)
    assert ext["character_filter"] == {"isExclude": True, "names": ["eva"], "tags": ["t1"]}
    assert e["customField"] == {"kept": [1, 2]}
    back = from_character_book(card).entries[0]
    assert back.mandatory is True and back.position is Position.AT_DEPTH
    assert back.character_filter == EXPECTED.character_filter


def test_r2_4_card_round_trip_keeps_meaning() -> None:
    b = Lorebook(name="Beasts", entries=(EXPECTED, LoreEntry(uid=8, keys=("x",), display_index=8)))
    again = from_character_book(to_character_book(b))
    assert again.name == "Beasts"
    for before, after in zip(b.entries, again.entries, strict=True):
        # only the card's own `use_regex` marker is added; every field means the same
        assert after.extra == {**before.extra, "use_regex": True}
        assert after == dataclasses.replace(before, extra=after.extra)


def test_r2_4_unknown_position_survives() -> None:
    b = read_world_info({"entries": {"1": {"uid": 1, "key": ["k"], "position": 9}}})
    assert b.entries[0].position == 9
    assert json.loads(write_world_info(b))["entries"]["1"]["position"] == 9


def test_r2_4_utf8_bom_accepted() -> None:
    b = read_world_info(b"\xef\xbb\xbf" + json.dumps({"entries": {"0": {"key": ["caf\u00e9"]}}}).encode())
    assert b.entries[0].keys == ("caf\u00e9",)


@pytest.mark.parametrize(("data", "message"), [
    (b"{not json", "not valid JSON"),
    (b"[1, 2]", "must be a JSON object"),
    (b'{"name": "x"}', "no `entries`"),
    (b'{"entries": 5}', "`entries` must be"),
    (b'{"entries": {"0": "text"}}', "entry '0' is not an object"),
    (b'{"entries": {"0": {"key": [{"a": 1}]}}}', "a key must be text"),
    (b'{"entries": {"0": {"characterFilter": "eva"}}}', "characterFilter must be an object"),
    (b'{"entries": {}, "scan_depth": "deep"}', "`scan_depth` must be a number"),
    (b'{"lorebookVersion": 5, "entries": []}', "NovelAI"),
    (b'{"spec": "lorebook_v3", "data": 3}', "`data` must be an object"),
    (b'{"entries": ["x"]}', "entry 0 is not an object"),
])
def test_r2_4_malformed_lorebook_raises_import_invalid(data: bytes, message: str) -> None:
    with pytest.raises(ImportInvalid) as info:
        read_world_info(data)
    assert message in str(info.value)
    assert info.value.code == "import_invalid"


def test_r2_4_whole_card_json_yields_its_book() -> None:
    card = {"spec": "chara_card_v2", "spec_version": "2.0",
            "data": {"name": "Eva", "character_book": {"name": "Eva's lore", "entries": [
                {"keys": ["k"], "content": "c", "extensions": "odd"}]}}}
    b = read_world_info(card)
    assert b.name == "Eva's lore" and b.entries[0].extra == {"extensions": "odd"}
    assert to_character_book(b)["entries"][0]["extensions"]["position"] == 1
    with pytest.raises(ImportInvalid, match="no `character_book`"):
        read_world_info({"spec": "chara_card_v3", "data": {"name": "Eva"}})


def test_a_top_level_case_sensitive_stays_top_level_on_export() -> None:
    card = {"name": "Card", "entries": [
        {"id": 0, "keys": ["Rose"], "content": "c", "case_sensitive": True, "extensions": {}},
        {"id": 1, "keys": ["k"], "content": "c", "extensions": {"case_sensitive": False}},
    ]}
    book = from_character_book(card)
    assert book.entries[0].case_sensitive is True
    out = to_character_book(book)["entries"]
    # SillyTavern reads `extensions.case_sensitive` only: it must stay as the card had it
    assert out[0]["case_sensitive"] is True and out[0]["extensions"]["case_sensitive"] is None
    assert "case_sensitive" not in out[1] and out[1]["extensions"]["case_sensitive"] is False
    again = from_character_book(to_character_book(book)).entries
    assert [e.case_sensitive for e in again] == [True, False]


def test_duplicate_entry_ids_are_kept_on_export() -> None:
    card = {"name": "Card", "entries": [
        {"id": 5, "keys": ["a"], "content": "A", "extensions": {}},
        {"id": 5, "keys": ["b"], "content": "B", "extensions": {}},
    ]}
    book = from_character_book(card)
    assert len({e.uid for e in book.entries}) == 2  # unique inside evacore
    assert [e["id"] for e in to_character_book(book)["entries"]] == [5, 5]
