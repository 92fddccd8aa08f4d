"""R2.9: story strings render like SillyTavern's (Handlebars subset, `{{trim}}`, newline rules)."""

from __future__ import annotations

import json

import pytest

from evacore.errors import InvalidInput
from evacore.render.instruct import ContextTemplate, InstructTemplate, bundled_context
from evacore.render.story import render_handlebars, render_story_string, wrap_story_string
from tests.helpers import FIXTURES as SHARED_FIXTURES

FIXTURES = SHARED_FIXTURES / "presets"
PARAMS = {
    "system": "Stay in character.",
    "description": "Seraphina guards the forest.",
    "personality": "kind",
    "char": "Seraphina",
    "user": "Anon",
}


def context(relative: str) -> ContextTemplate:
    return ContextTemplate.from_st(json.loads((FIXTURES / relative).read_text()))


def instruct(relative: str) -> InstructTemplate:
    return InstructTemplate.from_st(json.loads((FIXTURES / relative).read_text()))


def test_r2_9_if_else_and_variables() -> None:
    source = "{{#if a}}A={{a}}{{else}}no a{{/if}}|{{#if b}}B{{else if c}}C{{else}}-{{/if}}"
    assert render_handlebars(source, {"a": "x", "c": 1}) == "A=x|C"
    assert render_handlebars(source, {"a": "", "b": []}) == "no a|-"


def test_r2_9_unless_comments_and_triple_stash() -> None:
    source = "{{!-- note --}}{{#unless x}}none{{/unless}}{{! hi }}{{{y}}}"
    assert render_handlebars(source, {"y": "<b>&"}) == "none<b>&"


def test_r2_9_unknown_mustaches_are_left_for_the_macro_pass() -> None:
    source = "{{trim}}{{random::a::b}}{{roll 2d6}}{{getvar::x}}"
    assert render_handlebars(source, {}) == source


def test_r2_9_nested_blocks_and_standalone_lines() -> None:
    source = "top\n{{#if a}}\n  {{#if b}}\n  both\n  {{/if}}\n{{/if}}\nend"
    assert render_handlebars(source, {"a": 1, "b": 1}) == "top\n  both\nend"
    assert render_handlebars(source, {"a": 1}) == "top\nend"


def test_r2_9_whitespace_control() -> None:
    assert render_handlebars("a  {{~#if x~}}  b  {{~/if~}}  c", {"x": 1}) == "abc"


@pytest.mark.parametrize("bad", ["{{#if a}}open", "{{/if}}", "{{#each xs}}{{/each}}", "{{else}}"])
def test_r2_9_malformed_story_strings_are_rejected(bad: str) -> None:
    with pytest.raises(InvalidInput):
        render_handlebars(bad, {"a": 1})


def test_r2_9_default_story_string_without_instruct_ends_with_newline() -> None:
    story = render_story_string(bundled_context("Default"), PARAMS)
    assert story == (
        "Stay in character.\nSeraphina guards the forest.\nSeraphina's personality: kind\n"
    )


def test_r2_9_chatml_1_12_story_string_trims_and_gets_wrap_newline() -> None:
    story = render_story_string(
        context("context/ChatML.json"), PARAMS, instruct=instruct("instruct/ChatML.json")
    )
    assert story == (
        "<|im_start|>system\nStay in character.\nSeraphina guards the forest.\n"
        "Seraphina's personality: kind<|im_end|>\n"
    )


def test_r2_9_llama3_story_string_without_wrap_gets_no_newline() -> None:
    story = render_story_string(
        context("context/Llama-3-Instruct.json"),
        {"system": "Be brief."},
        instruct=instruct("instruct/Llama-3-Instruct.json"),
    )
    assert story == "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"


def test_r2_9_newer_story_suffix_suppresses_the_newline_and_wraps() -> None:
    chatml = instruct("newer/instruct-ChatML.json")
    story = render_story_string(bundled_context("ChatML"), {"system": "S"}, instruct=chatml)
    assert story == "S"
    assert wrap_story_string(story, chatml) == "<|im_start|>system\nS<|im_end|>\n"
    assert wrap_story_string("", chatml) == ""


def test_r2_9_dreamgen_else_branches_and_macros_in_values() -> None:
    dreamgen = context("newer/context-DreamGen-Role-Play-V1-ChatML.json")
    story = render_story_string(
        dreamgen, {"char": "Ann", "user": "Bob", "description": "{{char}} likes {{user}}."}
    )
    assert story == (
        "## Overall plot description:\n\nConversation between Ann and Bob.\n\n\n"
        "## Characters:\n\n### Ann\n\nAnn likes Bob.\n\n"
        "### Bob\n\nBob is the protagonist of the role-play.\n"
    )


def test_r2_9_leading_newlines_are_stripped_and_lore_aliases_filled() -> None:
    out = render_story_string("\n\n{{loreBefore}}|{{wiAfter}}", {"wiBefore": "W", "loreAfter": "L"})
    assert out == "W|L\n"


def test_r2_9_in_chat_story_gets_no_trailing_newline() -> None:
    in_chat = ContextTemplate(story_string="{{system}}", story_string_position=1)
    assert render_story_string(in_chat, {"system": "S"}) == "S"
    assert wrap_story_string("S", InstructTemplate(story_string_prefix="P"), context=in_chat) == "S"


def test_r2_9_1_12_system_sequence_prefix_wraps_the_system_prompt() -> None:
    old = InstructTemplate(
        system_sequence_prefix="[{{name}}]", system_sequence_suffix="[/SYS]", wrap=True
    )
    out = render_story_string("{{#if system}}{{system}}{{/if}}|", {"system": "S"}, instruct=old)
    assert out == "[System]\nS\n[/SYS]|\n"


def test_r2_9_expand_hook_runs_on_the_rendered_story() -> None:
    out = render_story_string(
        "{{weekday}} {{user}}", {"user": "Bob"}, expand=lambda s: s.replace("{{weekday}}", "Monday")
    )
    assert out == "Monday Bob\n"
