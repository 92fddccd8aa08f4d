"""R2.9: instruct/context/system-prompt templates import from and export to SillyTavern JSON."""

from __future__ import annotations

import json

import pytest

from evacore.errors import ImportInvalid, NotFound
from evacore.render.instruct import (
    DEFAULT_STORY_STRING,
    ContextTemplate,
    InstructTemplate,
    SystemPromptPreset,
    bundled_context,
    bundled_instruct,
    list_bundled,
    list_bundled_context,
)
from tests.helpers import FIXTURES as SHARED_FIXTURES

FIXTURES = SHARED_FIXTURES / "presets"


def load(relative: str) -> dict:
    return json.loads((FIXTURES / relative).read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    "relative",
    [
        "instruct/ChatML.json",
        "instruct/Llama-3-Instruct.json",
        "instruct/Mistral-V2-V3.json",
        "newer/instruct-ChatML.json",
    ],
)
def test_r2_9_instruct_fixture_round_trips_exactly(relative: str) -> None:
    data = load(relative)
    template = InstructTemplate.from_st(data)
    assert template.to_st() == data
    assert list(template.to_st()) == list(data), "key order is kept"
    assert template.extra == {}


def test_r2_9_old_and_new_instruct_shapes_are_both_read() -> None:
    old = InstructTemplate.from_st(load("instruct/ChatML.json"))
    new = InstructTemplate.from_st(load("newer/instruct-ChatML.json"))
    assert old.names_behavior == "always" and new.names_behavior == "force"
    assert old.story_string_prefix == "" and new.story_string_prefix == "<|im_start|>system"
    assert new.story_string_suffix == "<|im_end|>\n"
    assert old.sequences_as_stop_strings is True, "absent in 1.12 files: SillyTavern's default"
    mistral = InstructTemplate.from_st(load("instruct/Mistral-V2-V3.json"))
    assert mistral.user_alignment_message.startswith("Let's get started.")
    assert mistral.system_same_as_user is True and mistral.last_output_sequence == "[/INST]"


@pytest.mark.parametrize(
    "relative",
    [
        "context/ChatML.json",
        "context/Llama-3-Instruct.json",
        "context/Mistral-V2-V3.json",
        "newer/context-DreamGen-Role-Play-V1-ChatML.json",
    ],
)
def test_r2_9_context_fixture_round_trips_exactly(relative: str) -> None:
    data = load(relative)
    template = ContextTemplate.from_st(data)
    assert template.to_st() == data
    assert list(template.to_st()) == list(data)


def test_r2_9_newer_context_fields_are_read() -> None:
    dreamgen = ContextTemplate.from_st(load("newer/context-DreamGen-Role-Play-V1-ChatML.json"))
    assert dreamgen.trim_sentences is True and dreamgen.names_as_stop_strings is True
    assert (dreamgen.story_string_position, dreamgen.story_string_depth) == (0, 1)
    old = ContextTemplate.from_st(load("context/ChatML.json"))
    assert old.allow_jailbreak is False and old.names_as_stop_strings is True


@pytest.mark.parametrize(
    "relative", ["sysprompt/Neutral-Chat.json", "newer/sysprompt-Roleplay-Detailed.json"]
)
def test_r2_9_system_prompt_presets_round_trip(relative: str) -> None:
    data = load(relative)
    preset = SystemPromptPreset.from_st(data)
    assert preset.to_st() == data
    assert preset.content == data["content"]


def test_r2_9_unknown_keys_are_kept_in_extra_and_written_back() -> None:
    data = {**load("newer/instruct-ChatML.json"), "my_tool_field": {"x": 1}}
    template = InstructTemplate.from_st(data)
    assert template.extra == {"my_tool_field": {"x": 1}}
    assert template.to_st() == data


def test_r2_9_legacy_separator_and_names_keys_migrate() -> None:
    legacy = {
        "input_sequence": "### Instruction:",
        "output_sequence": "### Response:",
        "separator_sequence": "\n",
        "names": False,
        "names_force_groups": True,
        "system_prompt": "old field",
        "name": "Legacy",
    }
    template = InstructTemplate.from_st(legacy)
    assert template.output_suffix == "\n"
    assert template.names_behavior == "force"
    assert template.extra == {"system_prompt": "old field"}
    assert template.to_st() == {
        "input_sequence": "### Instruction:",
        "output_sequence": "### Response:",
        "output_suffix": "\n",
        "names_behavior": "force",
        "system_prompt": "old field",
        "name": "Legacy",
    }
    assert InstructTemplate.from_st({"names": True}).names_behavior == "always"
    assert InstructTemplate.from_st({"names": False}).names_behavior == "none"


def test_r2_9_missing_fields_take_sillytavern_defaults() -> None:
    template = InstructTemplate.from_st({"name": "Bare"})
    assert template.input_sequence == "### Instruction:"
    assert template.output_sequence == "### Response:"
    assert template.wrap and template.macro and template.sequences_as_stop_strings
    assert template.names_behavior == "force" and not template.bind_to_context
    context = ContextTemplate.from_st({})
    assert context.story_string == DEFAULT_STORY_STRING
    assert (context.example_separator, context.chat_start) == ("***", "***")
    assert context.story_string_depth == 1 and context.story_string_role == 0


def test_r2_9_changed_field_absent_from_the_import_is_exported() -> None:
    template = InstructTemplate.from_st(load("instruct/ChatML.json"))
    changed = template.model_copy(update={"story_string_prefix": "<|im_start|>system"})
    assert changed.to_st()["story_string_prefix"] == "<|im_start|>system"
    assert "story_string_prefix" not in template.to_st()


def test_r2_9_a_template_built_in_code_exports_every_field() -> None:
    exported = InstructTemplate(name="Mine", input_sequence="U:").to_st()
    assert exported["input_sequence"] == "U:"
    assert {"story_string_prefix", "system_sequence_prefix", "names_behavior"} <= set(exported)


@pytest.mark.parametrize(
    "bad",
    [["not", "an", "object"], {"wrap": "sometimes"}, {"names_behavior": "loud"}],
)
def test_r2_9_malformed_presets_are_rejected(bad: object) -> None:
    with pytest.raises(ImportInvalid):
        InstructTemplate.from_st(bad)  # type: ignore[arg-type]


EXPECTED_BUNDLED = {
    "Alpaca",
    "ChatML",
    "Command R",
    "Gemma 2",
    "Llama 2 Chat",
    "Llama 3 Instruct",
    "Mistral V1",
    "Mistral V2 & V3",
    "Mistral V7",
    "Mistral V7-Tekken",
    "Phi",
    "Vicuna 1.1",
}


def test_r2_9_bundled_presets_are_listed_and_load() -> None:
    names = list_bundled()
    assert EXPECTED_BUNDLED <= set(names)
    for name in names:
        template = bundled_instruct(name)
        assert template.name == name
        assert template.input_sequence and template.to_st()["name"] == name
    assert "Default" in list_bundled_context()
    assert set(names) <= set(list_bundled_context()), "every instruct preset has its context"


def test_r2_9_bundled_preset_facts() -> None:
    chatml = bundled_instruct("chatml")
    assert chatml.input_sequence == "<|im_start|>user" and chatml.wrap
    assert chatml.story_string_prefix == "<|im_start|>system"
    llama3 = bundled_instruct("Llama 3 Instruct")
    assert llama3.output_suffix == "<|eot_id|>" and not llama3.wrap
    gemma = bundled_instruct("Gemma 2")
    assert gemma.output_sequence == "<start_of_turn>model" and gemma.system_same_as_user
    assert bundled_instruct("Mistral V7").system_sequence == "[SYSTEM_PROMPT] "
    assert bundled_instruct("Command R").stop_sequence == "<|END_OF_TURN_TOKEN|>"
    assert bundled_instruct("Phi").input_sequence == "<|user|>\n"
    assert bundled_context("Default").chat_start == "***"


def test_r2_9_bundled_copies_are_independent() -> None:
    first = bundled_instruct("ChatML")
    first.input_sequence = "changed"
    assert bundled_instruct("ChatML").input_sequence == "<|im_start|>user"


def test_r2_9_unknown_bundled_name_lists_the_known_ones() -> None:
    with pytest.raises(NotFound) as info:
        bundled_instruct("Nonexistent 9")
    assert "ChatML" in info.value.message
