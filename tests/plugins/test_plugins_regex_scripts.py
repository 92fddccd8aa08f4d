"""The shipped regex-scripts plugin: SillyTavern placements, depths, flags, import, time bound."""

from __future__ import annotations

import time
from typing import Any

import pytest

from evacore.errors import InvalidInput
from evacore.plugins import PluginManager, discover
from evacore.plugins.builtin.regex_scripts import import_sillytavern
from tests.plugins.conftest import element, tour


def _manager(scripts: list[dict[str, Any]], **settings: Any) -> PluginManager:
    manager = PluginManager(discover(None, entry_points=False))
    manager.update("regex_scripts", settings={"scripts": scripts, **settings})
    return manager


def _chat() -> list[dict[str, Any]]:
    """system, lore before the history, 4 history messages, at-depth lore, the current input."""
    return [
        element("sys", "system", "You are Eva. cat", protected=True, kind="system", source="system"),
        element("lore:1", "system", "Cats purr.", kind="lore", source="lore:1"),
        element("h1", "user", "my cat sleeps"),            # depth 4
        element("h2", "assistant", "the cat purrs"),       # depth 3
        element("h3", "user", "a cat again"),              # depth 2
        element("lore:2", "system", "cat lore at depth", kind="lore", source="lore:2"),
        element("h4", "assistant", "cat cat"),             # depth 1
        element("input", "user", "cat?", protected=True, kind="input"),  # depth 0
    ]


def _base(**kw: Any) -> Any:
    kw.setdefault("editable_protected", frozenset({"input"}))
    kw.setdefault("expand_macros", lambda t: t.replace("{{user}}", "Anna").replace("{{char}}", "Eva"))
    return tour(**kw)


async def _prompt(manager: PluginManager, **kw: Any) -> dict[str, str]:
    result = await manager.dispatcher.run_interceptors(_chat(), ctx_base=_base(**kw))
    assert all(r.outcome in ("applied", "no_change") for r in result.log), result.log
    return {m["id"]: m["content"] for m in result.messages}


async def test_r2_user_input_scripts_edit_every_user_message_of_the_prompt() -> None:
    manager = _manager([{"scriptName": "dog", "findRegex": "/cat/g", "replaceString": "dog", "placement": [1]}])
    out = await _prompt(manager)
    assert (out["h1"], out["h3"], out["input"]) == ("my dog sleeps", "a dog again", "dog?")
    assert (out["h2"], out["h4"], out["sys"], out["lore:1"]) == ("the cat purrs", "cat cat", "You are Eva. cat",
                                                                 "Cats purr.")
    text, _ = await manager.dispatcher.run_postprocess("cat", ctx_base=_base())
    assert text == "cat"


async def test_r2_ai_output_scripts_edit_the_saved_answer_not_the_history() -> None:
    manager = _manager([{"scriptName": "dog", "findRegex": "/cat/g", "replaceString": "dog", "placement": [2]}])
    text, log = await manager.dispatcher.run_postprocess("a cat and a cat", ctx_base=_base())
    assert text == "a dog and a dog" and log[0].outcome == "applied"
    out = await _prompt(manager)
    assert out["h2"] == "the cat purrs" and out["h4"] == "cat cat"


async def test_r2_prompt_only_scripts_respect_min_and_max_depth() -> None:
    manager = _manager([{"scriptName": "mid", "findRegex": "/cat/g", "replaceString": "CAT",
                         "placement": [1, 2], "promptOnly": True, "minDepth": 1, "maxDepth": 3}])
    out = await _prompt(manager)
    assert out["h1"] == "my cat sleeps"        # depth 4 > max
    assert out["h2"] == "the CAT purrs"        # depth 3
    assert out["h3"] == "a CAT again"          # depth 2
    assert out["h4"] == "CAT CAT"              # depth 1
    assert out["input"] == "cat?"              # depth 0 < min
    text, _ = await manager.dispatcher.run_postprocess("cat", ctx_base=_base())
    assert text == "cat"                       # prompt-only never edits the saved answer


async def test_r2_world_info_and_whole_prompt_placements() -> None:
    manager = _manager([
        {"scriptName": "wi", "findRegex": "/cat/gi", "replaceString": "lynx", "placement": [5], "promptOnly": True},
        {"name": "all", "find": "/Eva/g", "replace": "{{char}}!", "placement": ["prompt"], "max_depth": 10},
        {"name": "md", "find": "/the/g", "replace": "THE", "placement": ["prompt"], "markdown_only": True},
    ])
    out = await _prompt(manager)
    assert out["lore:1"] == "lynxs purr." and out["lore:2"] == "lynx lore at depth"
    assert out["h1"] == "my cat sleeps"
    assert out["sys"] == "You are Eva. cat"    # protected and not editable: left alone
    assert out["h2"] == "the cat purrs"        # markdown-only scripts never touch the prompt


async def test_r2_whole_prompt_placement_reaches_editable_protected_and_respects_depth() -> None:
    manager = _manager([{"name": "q", "find": "/\\?$/", "replace": "?!", "placement": ["prompt"],
                         "max_depth": 0}])
    out = await _prompt(manager, editable_protected=frozenset({"input", "sys"}))
    assert out["input"] == "cat?!"
    manager.update("regex_scripts", settings={"scripts": [
        {"name": "sys", "find": "Eva", "replace": "{{char}} ({{user}})", "placement": ["prompt"], "max_depth": 0}]})
    out = await _prompt(manager, editable_protected=frozenset({"input", "sys"}))
    assert out["sys"] == "You are Eva (Anna). cat"  # before the history there is no depth limit


async def test_r2_flags_groups_match_and_trim_strings() -> None:
    manager = _manager([
        {"scriptName": "first only", "findRegex": "cat", "replaceString": "kitten", "placement": [2]},
        {"scriptName": "groups", "findRegex": "/(\\w+) says \"([^\"]*)\"/g",
         "replaceString": "$1: «$2» [{{match}}] $9", "trimStrings": ["um, "], "placement": [2]},
    ])
    text, _ = await manager.dispatcher.run_postprocess(
        'cat cat. Eva says "um, hello"', ctx_base=_base())
    assert text == 'kitten cat. Eva: «hello» [Eva says "hello"] '


async def test_r2_macros_in_find_raw_and_escaped() -> None:
    manager = _manager([
        {"scriptName": "raw", "findRegex": "/{{user}}/g", "replaceString": "you", "placement": [2],
         "substituteRegex": 1},
        {"scriptName": "esc", "findRegex": "/{{char}}/g", "replaceString": "me", "placement": [2],
         "substituteRegex": 2},
    ])
    base = _base(expand_macros=lambda t: t.replace("{{user}}", "Anna").replace("{{char}}", "E.a"))
    text, _ = await manager.dispatcher.run_postprocess("Anna and E.a and Eva", ctx_base=base)
    assert text == "you and me and Eva"  # escaped: "." is literal, so "Eva" does not match


async def test_r2_scope_disabled_and_chat_scoped_scripts() -> None:
    manager = _manager([
        {"name": "off", "find": "/a/g", "replace": "X", "placement": ["ai_output"], "disabled": True},
        {"name": "here", "find": "/b/g", "replace": "Y", "placement": ["ai_output"], "scope": "chat",
         "chat_ids": ["chat-1"]},
    ])
    assert (await manager.dispatcher.run_postprocess("ab", ctx_base=_base()))[0] == "aY"
    assert (await manager.dispatcher.run_postprocess("ab", ctx_base=_base(chat_id="other")))[0] == "ab"


async def test_r2_catastrophic_backtracking_cannot_hang_a_tour() -> None:
    manager = _manager([
        {"name": "evil", "find": "/^(a|aa)+(?=b)$/", "replace": "x", "placement": ["ai_output"]},
        {"name": "after", "find": "/tail/", "replace": "TAIL", "placement": ["ai_output"]},
    ], regex_timeout=0.05)
    text = "a" * 100 + " ?tail"
    t0 = time.perf_counter()
    out, log = await manager.dispatcher.run_postprocess(text, ctx_base=_base())
    assert time.perf_counter() - t0 < 1.5
    assert out == "a" * 100 + " ?TAIL" and log[0].outcome == "applied"


def test_r2_bad_scripts_are_refused_with_a_clear_error() -> None:
    manager = PluginManager(discover(None, entry_points=False))
    with pytest.raises(InvalidInput, match="invalid regex"):
        manager.update("regex_scripts", settings={"scripts": [{"findRegex": "/(unclosed/g", "placement": [2]}]})
    with pytest.raises(InvalidInput, match="unsupported regex flag"):
        manager.update("regex_scripts", settings={"scripts": [{"findRegex": "/a/gx", "placement": [2]}]})
    with pytest.raises(InvalidInput, match="placement"):
        manager.update("regex_scripts", settings={"scripts": [{"findRegex": "/a/", "placement": [9]}]})


ST_EXPORT = {
    "id": "0f6c1a53-5f2b-4a3e-9a39-2f4c7c1a8b10",
    "scriptName": "Remove narration asterisks",
    "findRegex": "/\\*([^*]+)\\*/g",
    "replaceString": "$1",
    "trimStrings": [],
    "placement": [2],
    "disabled": False,
    "markdownOnly": False,
    "promptOnly": False,
    "runOnEdit": True,
    "substituteRegex": 0,
    "minDepth": None,
    "maxDepth": None,
}


async def test_r2_sillytavern_exports_import_as_they_are() -> None:
    scripts = import_sillytavern(ST_EXPORT)
    assert scripts[0].name == "Remove narration asterisks" and scripts[0].placement == ["ai_output"]
    card = {"spec": "chara_card_v2", "data": {"extensions": {"regex_scripts": [ST_EXPORT, ST_EXPORT | {
        "scriptName": "legacy", "substituteRegex": True, "minDepth": "", "placement": [0, 1]}]}}}
    from_card = import_sillytavern(card)
    assert [s.name for s in from_card] == ["Remove narration asterisks", "legacy"]
    assert from_card[1].substitute_regex == 1 and from_card[1].min_depth is None
    assert from_card[1].placement == ["user_input"]
    manager = _manager([s.model_dump() for s in scripts])
    text, _ = await manager.dispatcher.run_postprocess("*smiles* Hello", ctx_base=_base())
    assert text == "smiles Hello"
    stored = manager.describe("regex_scripts")["settings"]["scripts"][0]
    assert stored["find"] == "/\\*([^*]+)\\*/g" and stored["run_on_edit"] is True


async def test_r2_a_slow_pattern_costs_one_time_limit_per_tour_not_one_per_message() -> None:
    manager = _manager([
        {"name": "evil", "find": "/^(a|aa)+(?=b)$/", "replace": "x", "placement": ["prompt"]},
        {"name": "tag", "find": "/\\?$/", "replace": "?#", "placement": ["prompt"]},
    ], regex_timeout=0.1)
    messages = [element(f"h{i}", "user", "a" * 100 + " ?") for i in range(40)]
    t0 = time.perf_counter()
    result = await manager.dispatcher.run_interceptors(messages, ctx_base=_base())
    assert time.perf_counter() - t0 < 1.5
    assert result.log[0].outcome == "applied"
    assert all(m["content"].endswith(" ?#") for m in result.messages)
