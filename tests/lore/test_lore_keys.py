"""R2.4 key matching: primary/secondary keys, selective logic, regex keys, case, whole words,
scan depth, names, extra haystacks, decorators, filters and triggers."""

from __future__ import annotations

import pytest
from lore_helpers import book, chat, cuts, entry, run, uids

from evacore.lore import (
    CharacterFilter,
    CharacterInfo,
    ScanMessage,
    SelectiveLogic,
    WorldInfoSettings,
)


def test_r2_4_primary_key_substring_case_insensitive_by_default() -> None:
    r = run(book(entry(1, ["dragon"]), entry(2, ["unicorn"])), "Look, DRAGONS overhead!")
    assert uids(r) == [1]
    assert r.activated[0].reasons == ["key 'dragon' in message 0 (User)"]


def test_r2_4_any_primary_key_activates() -> None:
    assert uids(run(book(entry(1, ["wyrm", "dragon"])), "a dragon")) == [1]


def test_r2_4_empty_or_blank_key_never_matches_and_keys_are_trimmed() -> None:
    r = run(book(entry(1, ["", "   "]), entry(2, ["  dragon  "])), "a dragon")
    assert uids(r) == [2]


def test_r2_4_entry_without_keys_is_skipped() -> None:
    assert uids(run(book(entry(1, [])), "anything")) == []


def test_r2_4_constant_activates_without_keys() -> None:
    r = run(book(entry(1, [], constant=True)), "anything")
    assert uids(r) == [1] and r.activated[0].reasons == ["constant"]


def test_r2_4_disabled_entry_never_activates() -> None:
    r = run(book(entry(1, ["dragon"], disable=True)), "a dragon")
    assert uids(r) == [] and cuts(r) == {1: "disabled"}


SECONDARY = [
    # logic, text, activates
    (SelectiveLogic.AND_ANY, "dragon gold", True),
    (SelectiveLogic.AND_ANY, "dragon", False),
    (SelectiveLogic.NOT_ALL, "dragon gold", True),
    (SelectiveLogic.NOT_ALL, "dragon gold cave", False),
    (SelectiveLogic.NOT_ANY, "dragon", True),
    (SelectiveLogic.NOT_ANY, "dragon cave", False),
    (SelectiveLogic.AND_ALL, "dragon gold cave", True),
    (SelectiveLogic.AND_ALL, "dragon gold", False),
]


@pytest.mark.parametrize(("logic", "text", "expected"), SECONDARY)
def test_r2_4_selective_logic(logic: SelectiveLogic, text: str, expected: bool) -> None:
    e = entry(1, ["dragon"], secondary_keys=("gold", "cave"), selective_logic=logic)
    assert uids(run(book(e), text)) == ([1] if expected else [])


def test_r2_4_secondary_keys_need_a_primary_match() -> None:
    e = entry(1, ["dragon"], secondary_keys=("gold",), selective_logic=SelectiveLogic.NOT_ANY)
    assert uids(run(book(e), "nothing here")) == []


def test_r2_4_selective_false_ignores_secondary_keys() -> None:
    e = entry(1, ["dragon"], secondary_keys=("gold",), selective=False)
    assert uids(run(book(e), "a dragon")) == [1]


def test_r2_4_case_sensitive_global_setting() -> None:
    b = book(entry(1, ["Dragon"]))
    assert uids(run(b, "a dragon", settings=WorldInfoSettings(case_sensitive=True))) == []
    assert uids(run(b, "a Dragon", settings=WorldInfoSettings(case_sensitive=True))) == [1]


def test_r2_4_case_sensitive_per_entry_overrides_global() -> None:
    b = book(entry(1, ["Dragon"], case_sensitive=True), entry(2, ["Dragon"], case_sensitive=False))
    assert uids(run(b, "a dragon")) == [2]
    assert uids(run(b, "a dragon", settings=WorldInfoSettings(case_sensitive=True))) == [2]


def test_r2_4_match_whole_words_global_setting() -> None:
    b = book(entry(1, ["cat"]))
    on = WorldInfoSettings(match_whole_words=True)
    assert uids(run(b, "concatenate", settings=on)) == []
    assert uids(run(b, "the cat, sleeping", settings=on)) == [1]
    assert uids(run(b, "(cat)", settings=on)) == [1]
    assert uids(run(b, "concatenate")) == [1]


def test_r2_4_match_whole_words_per_entry_overrides_global() -> None:
    b = book(entry(1, ["cat"], match_whole_words=True), entry(2, ["cat"], match_whole_words=False))
    assert uids(run(b, "concatenate")) == [2]
    assert uids(run(b, "concatenate", settings=WorldInfoSettings(match_whole_words=True))) == [2]


def test_r2_4_whole_words_multi_word_key_is_substring() -> None:
    b = book(entry(1, ["black cat"], match_whole_words=True))
    assert uids(run(b, "a black caterpillar")) == [1]


def test_r2_4_whole_words_treat_non_ascii_letters_as_boundaries() -> None:
    # SillyTavern's boundary is ASCII \W, so an accented neighbour counts as a boundary.
    assert uids(run(book(entry(1, ["caf"], match_whole_words=True)), "un café")) == [1]


def test_r2_4_regex_key_with_flags() -> None:
    b = book(entry(1, ["/drag(on|ons)\\b/i"]))
    assert uids(run(b, "Two DRAGONS.")) == [1]
    assert uids(run(b, "dragonfly")) == []


def test_r2_4_regex_key_ignores_case_setting_and_whole_words() -> None:
    b = book(entry(1, ["/Dragon/"], match_whole_words=True))
    assert uids(run(b, "a dragon")) == []
    assert uids(run(b, "Dragonfly")) == [1]


def test_r2_4_regex_key_escaped_slash() -> None:
    assert uids(run(book(entry(1, ["/and\\/or/"])), "this and/or that")) == [1]


def test_r2_4_key_with_unescaped_slash_is_plain_text() -> None:
    assert uids(run(book(entry(1, ["/a/b/"])), "path /a/b/ here")) == [1]


def test_r2_4_regex_javascript_syntax_is_translated() -> None:
    b = book(
        entry(1, ["/(?<word>caf\\u00e9)/"]),
        entry(2, ["/start[^]end/"]),
        entry(3, ["/a\\sb/"]),
    )
    r = run(b, "un café, start\nend, a\u00a0b")
    assert sorted(uids(r)) == [1, 2, 3]


def test_r2_4_regex_multiline_flag() -> None:
    b = book(entry(1, ["/^tea$/m"]), entry(2, ["/^tea$/"]))
    assert uids(run(b, "coffee\ntea\nmilk")) == [1]


def test_r2_4_regex_re2_cannot_run_is_skipped_with_diagnostic() -> None:
    b = book(entry(1, ["/(?<=x)y/", "dragon"]), entry(2, ["/(a)\\1/"]))
    r = run(b, "xy aa dragon")
    assert uids(r) == [1]
    skipped = {(p["uid"], p["key"]) for p in r.diagnostics["skipped_keys"]}
    assert skipped == {(1, "/(?<=x)y/"), (2, "/(a)\\1/")}


def test_r2_4_include_names_puts_speaker_in_haystack() -> None:
    b = book(entry(1, ["eva"]))
    msgs = chat("hello", "hi there", "how are you")
    assert uids(run(b, msgs, settings=WorldInfoSettings(include_names=True))) == [1]
    assert uids(run(b, msgs, settings=WorldInfoSettings(include_names=False))) == []


def test_r2_4_scan_depth_global() -> None:
    b = book(entry(1, ["dragon"]))
    msgs = chat("a dragon", "nothing", "still nothing")
    assert uids(run(b, msgs)) == []
    assert uids(run(b, msgs, settings=WorldInfoSettings(depth=3))) == [1]


def test_r2_4_scan_depth_per_entry_and_per_book() -> None:
    msgs = chat("a dragon", "nothing", "still nothing")
    assert uids(run(book(entry(1, ["dragon"], scan_depth=3)), msgs)) == [1]
    assert uids(run(book(entry(1, ["dragon"]), scan_depth=3), msgs)) == [1]
    # the entry's own depth wins over the book's
    assert uids(run(book(entry(1, ["dragon"], scan_depth=1), scan_depth=3), msgs)) == []


def test_r2_4_newest_message_is_scanned() -> None:
    b = book(entry(1, ["dragon"], scan_depth=1))
    assert uids(run(b, chat("hello", "hi", "a dragon!"))) == [1]


def test_r2_4_scan_depth_zero_leaves_only_keyless_activations() -> None:
    b = book(entry(1, ["dragon"], scan_depth=0), entry(2, [], constant=True, scan_depth=0))
    r = run(b, "a dragon", extra_haystack={"note": "dragon"})
    assert uids(r) == [2]


def test_r2_4_system_messages_are_not_scanned() -> None:
    msgs = [ScanMessage("Narrator", "a dragon", is_system=True), ScanMessage("User", "hi", True)]
    assert uids(run(book(entry(1, ["dragon"])), msgs)) == []


MATCH_FLAGS = [
    ("match_persona_description", {"persona_description": "I fear dragons"}),
    ("match_character_description", {"character": CharacterInfo("Eva", description="owns a dragon")}),
    ("match_character_personality", {"character": CharacterInfo("Eva", personality="dragon-like")}),
    ("match_character_depth_prompt", {"character": CharacterInfo("Eva", depth_prompt="dragon lore")}),
    ("match_scenario", {"character": CharacterInfo("Eva", scenario="a dragon's den")}),
    ("match_creator_notes", {"character": CharacterInfo("Eva", creator_notes="dragon card")}),
]


@pytest.mark.parametrize(("flag", "kw"), MATCH_FLAGS)
def test_r2_4_match_extra_haystack_fields(flag: str, kw: dict) -> None:
    with_flag = book(entry(1, ["dragon"], **{flag: True}), entry(2, ["dragon"]))
    r = run(with_flag, "hello", **kw)
    assert uids(r) == [1]
    assert "dragon" in r.activated[0].reasons[0]


def test_r2_4_injected_prompts_are_scanned_for_every_entry() -> None:
    r = run(book(entry(1, ["dragon"])), "hello", extra_haystack={"authors_note": "A dragon looms."})
    assert uids(r) == [1]
    assert r.activated[0].reasons == ["key 'dragon' in injected 'authors_note'"]


def test_r2_4_decorator_activate_forces_and_is_stripped() -> None:
    r = run(book(entry(1, ["never"], content="@@activate\nThe sky is green.")), "hello")
    assert uids(r) == [1]
    assert r.activated[0].content == "The sky is green."
    assert r.activated[0].reasons == ["decorator @@activate"]


def test_r2_4_decorator_dont_activate_blocks_matching_keys() -> None:
    r = run(book(entry(1, ["dragon"], content="@@dont_activate\nDragon lore.")), "a dragon")
    assert uids(r) == [] and cuts(r) == {1: "decorator"}


def test_r2_4_decorator_fallback_line_stands_in_for_unknown() -> None:
    content = "@@activate_only_every 3\n@@@activate\nLore."
    r = run(book(entry(1, ["never"], content=content)), "hello")
    assert uids(r) == [1] and r.activated[0].content == "Lore."


def test_r2_4_triggers_limit_generation_types() -> None:
    b = book(entry(1, ["dragon"], triggers=("swipe", "regenerate")))
    r = run(b, "a dragon")
    assert uids(r) == [] and cuts(r) == {1: "trigger"}
    assert uids(run(b, "a dragon", generation_type="swipe")) == [1]


def test_r2_4_character_filter_names() -> None:
    only_eva = entry(1, ["dragon"], character_filter=CharacterFilter(names=("eva",)))
    not_eva = entry(2, ["dragon"], character_filter=CharacterFilter(names=("eva",), is_exclude=True))
    b = book(only_eva, not_eva)
    assert uids(run(b, "a dragon", character=CharacterInfo("Eva", filename="eva"))) == [1]
    r = run(b, "a dragon", character=CharacterInfo("Bob", filename="bob"))
    assert uids(r) == [2] and cuts(r) == {1: "character_filter"}


def test_r2_4_character_filter_tags() -> None:
    fantasy = entry(1, ["dragon"], character_filter=CharacterFilter(tags=("fantasy",)))
    no_scifi = entry(2, ["dragon"], character_filter=CharacterFilter(tags=("scifi",), is_exclude=True))
    b = book(fantasy, no_scifi)
    assert sorted(uids(run(b, "a dragon", character=CharacterInfo("Eva", tags=("fantasy",))))) == [1, 2]
    assert uids(run(b, "a dragon", character=CharacterInfo("Eva", tags=("scifi",)))) == []


def test_r2_4_keys_and_content_go_through_macros() -> None:
    b = book(entry(1, ["{{char}}'s sword"], content="{{char}} carries Dawnbreaker."))
    r = run(b, "Where is Eva's sword?", macros=lambda s: s.replace("{{char}}", "Eva"))
    assert uids(r) == [1] and r.activated[0].content == "Eva carries Dawnbreaker."


def test_r2_4_forced_entry_activates_without_keys() -> None:
    r = run(book(entry(1, ["never"])), "hello", force=[("B", 1)])
    assert uids(r) == [1] and r.activated[0].reasons == ["forced"]


def test_r2_4_display_fields_do_not_change_activation() -> None:
    plain = book(entry(1, ["dragon"]))
    dressed = book(entry(1, ["dragon"], comment="Dragons", add_memo=True, vectorized=True,
                         automation_id="auto", display_index=7))
    assert uids(run(plain, "a dragon")) == uids(run(dressed, "a dragon")) == [1]
    assert run(dressed, "a dragon").diagnostics["activated"][0]["comment"] == "Dragons"


def test_r2_4_legacy_angle_macros_in_keys_are_substituted() -> None:
    b = book(entry(1, ["<USER>'s house"]))
    r = run(b, "We met at Ann's house", macros=lambda s: s.replace("<USER>", "Ann"))
    assert uids(r) == [1]
