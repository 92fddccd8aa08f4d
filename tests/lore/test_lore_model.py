"""R2.4 data model: SillyTavern's entry fields and global settings with their defaults."""

from __future__ import annotations

import dataclasses

import pytest

from evacore.lore import (
    CharacterStrategy,
    LoreEntry,
    Position,
    Role,
    SelectiveLogic,
    WorldInfoSettings,
)


def test_r2_4_entry_defaults_match_sillytavern() -> None:
    e = LoreEntry()
    assert (e.keys, e.secondary_keys, e.comment, e.content) == ((), (), "", "")
    assert e.selective is True and e.selective_logic is SelectiveLogic.AND_ANY
    assert e.constant is False and e.disable is False and e.vectorized is False
    assert e.order == 100 and e.position is Position.BEFORE_CHAR
    assert e.depth == 4 and e.role is Role.SYSTEM
    assert (e.probability, e.use_probability) == (100, True)
    assert (e.group, e.group_override, e.group_weight, e.use_group_scoring) == ("", False, 100, None)
    assert (e.scan_depth, e.case_sensitive, e.match_whole_words) == (None, None, None)
    assert (e.sticky, e.cooldown, e.delay) == (None, None, None)
    assert e.delay_until_recursion == 0 and e.delay_level == 0
    assert e.exclude_recursion is False and e.prevent_recursion is False
    assert e.triggers == () and e.character_filter is None and e.outlet_name == ""
    assert e.mandatory is False and e.extra == {}
    flags = [f.name for f in dataclasses.fields(e) if f.name.startswith("match_") and f.name != "match_whole_words"]
    assert flags == [
        "match_persona_description", "match_character_description", "match_character_personality",
        "match_character_depth_prompt", "match_scenario", "match_creator_notes",
    ]
    assert all(getattr(e, f) is False for f in flags)


def test_r2_4_settings_defaults_match_sillytavern() -> None:
    s = WorldInfoSettings()
    assert (s.depth, s.budget, s.budget_cap) == (2, 25, 0)
    assert (s.min_activations, s.min_activations_depth_max, s.max_recursion_steps) == (0, 0, 0)
    assert s.recursive is False and s.include_names is True
    assert s.case_sensitive is False and s.match_whole_words is False
    assert s.use_group_scoring is False and s.overflow_alert is False
    assert s.character_strategy is CharacterStrategy.CHARACTER_FIRST


def test_r2_4_settings_budget_above_100_resets_to_25() -> None:
    assert WorldInfoSettings(budget=150).budget == 25
    assert WorldInfoSettings(budget=100).budget == 100


def test_r2_4_settings_read_sillytavern_names() -> None:
    s = WorldInfoSettings.from_dict({
        "world_info_depth": 5, "world_info_budget": 40, "world_info_recursive": True,
        "world_info_character_strategy": 2, "budget_cap": 300, "unrelated": 1,
    })
    assert (s.depth, s.budget, s.recursive, s.budget_cap) == (5, 40, True, 300)
    assert s.character_strategy is CharacterStrategy.GLOBAL_FIRST
    assert WorldInfoSettings.from_dict(s.to_dict()) == s
    assert WorldInfoSettings(character_strategy="evenly").character_strategy is CharacterStrategy.EVENLY
    with pytest.raises(ValueError):
        WorldInfoSettings(character_strategy="sideways")


@pytest.mark.parametrize(("number", "position"), list(enumerate(Position)))
def test_r2_4_position_numbers_follow_sillytavern(number: int, position: Position) -> None:
    assert Position.from_st(number) is position and position.st == number
    assert LoreEntry(position=number).position is position  # type: ignore[arg-type]


def test_r2_4_unknown_position_kept_as_number() -> None:
    assert LoreEntry(position=9).position == 9  # type: ignore[arg-type]


def test_r2_4_role_numbers_follow_sillytavern() -> None:
    assert [Role.from_st(i) for i in range(3)] == [Role.SYSTEM, Role.USER, Role.ASSISTANT]
    assert Role.from_st(None) is Role.SYSTEM


def test_r2_4_delay_until_recursion_true_means_level_one() -> None:
    assert LoreEntry(delay_until_recursion=True).delay_level == 1
    assert LoreEntry(delay_until_recursion=3).delay_level == 3
    assert LoreEntry(delay_until_recursion=False).delay_level == 0


def test_r2_4_selective_logic_values() -> None:
    assert [int(v) for v in SelectiveLogic] == [0, 1, 2, 3]
    assert LoreEntry(selective_logic=2).selective_logic is SelectiveLogic.NOT_ANY  # type: ignore[arg-type]
