"""SillyTavern presets: instruct, context, system prompt (old and newer shapes), master export."""

from __future__ import annotations

import json

import pytest

from evacore.errors import ImportInvalid, TooLarge
from evacore.formats.limits import Limits
from evacore.formats.presets import Preset, read_preset, write_preset
from tests.formats._build import FIXTURES

PRESETS = sorted((FIXTURES / "presets").rglob("*.json"))
EXPECTED_KIND = {
    "instruct": "instruct", "context": "context", "sysprompt": "sysprompt",
    "instruct-ChatML.json": "instruct", "context-DreamGen-Role-Play-V1-ChatML.json": "context",
    "sysprompt-Roleplay-Detailed.json": "sysprompt",
}


def _expected(path) -> str:
    return EXPECTED_KIND.get(path.name) or EXPECTED_KIND[path.parent.name]


@pytest.mark.parametrize("path", PRESETS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_r2_9_fixture_presets_read_and_write_back_unchanged(path) -> None:
    raw = path.read_bytes()
    [preset] = read_preset(raw)
    assert preset.kind == _expected(path)
    assert preset.name == json.loads(raw)["name"]
    assert preset.data == json.loads(raw)
    out = write_preset(preset)
    assert read_preset(out) == [preset]
    assert json.loads(out) == json.loads(raw)
    assert list(json.loads(out)) == list(json.loads(raw))


def test_r2_9_newer_shapes_keep_their_new_fields() -> None:
    [instruct] = read_preset((FIXTURES / "presets/newer/instruct-ChatML.json").read_bytes())
    assert instruct.data["story_string_prefix"] == "<|im_start|>system"
    assert instruct.data["sequences_as_stop_strings"] is True
    [context] = read_preset(
        (FIXTURES / "presets/newer/context-DreamGen-Role-Play-V1-ChatML.json").read_bytes())
    assert context.data["story_string_depth"] == 1 and "{{anchorBefore}}" in context.data[
        "story_string"]
    [sysprompt] = read_preset(
        (FIXTURES / "presets/newer/sysprompt-Roleplay-Detailed.json").read_bytes())
    assert sysprompt.data["post_history"] == ""


def test_r2_9_master_export_yields_each_member() -> None:
    master = {
        "instruct": json.loads((FIXTURES / "presets/instruct/ChatML.json").read_text()),
        "context": json.loads((FIXTURES / "presets/context/ChatML.json").read_text()),
        "sysprompt": json.loads((FIXTURES / "presets/sysprompt/Neutral-Chat.json").read_text()),
        "reasoning": {"name": "DeepSeek", "prefix": "<think>", "suffix": "</think>",
                      "separator": "\n\n"},
        "preset": {"temp": 0.7, "top_p": 0.9},
    }
    presets = read_preset(json.dumps(master).encode())
    assert [(p.kind, p.name) for p in presets] == [
        ("instruct", "ChatML"), ("context", "ChatML"), ("sysprompt", "Neutral - Chat"),
        ("reasoning", "DeepSeek"), ("unknown", "preset")]
    assert presets[4].data == {"temp": 0.7, "top_p": 0.9}
    assert read_preset(master) == presets


def test_r2_9_renamed_preset_writes_its_new_name_and_keeps_other_fields() -> None:
    [preset] = read_preset((FIXTURES / "presets/instruct/Mistral-V2-V3.json").read_bytes())
    renamed = Preset(preset.kind, "Mine", preset.data)
    obj = json.loads(write_preset(renamed))
    assert obj["name"] == "Mine"
    assert obj["user_alignment_message"].startswith("Let's get started")


@pytest.mark.parametrize(("payload", "needle"), [
    (b"[]", "must be a JSON object"),
    (b'{"name": "x", "temperature": 1}', "expected a SillyTavern instruct template"),
    (b'{"name": "x", "input_sequence": "a", "output_sequence": "b", "story_string": "s"}',
     "ambiguous preset: it looks like instruct and context"),
    (b'{"input_sequence": "a", "output_sequence": "b"}', "has no 'name'"),
    (b'{"instruct": {"name": "x", "story_string": "s"}}',
     "does not hold a valid instruct preset"),
    (b'{"name": "x", "content": "\xff"}', "not valid UTF-8"),
    (b'{"name": "x", "content": ', "not valid JSON"),
])
def test_r8_2_bad_preset_names_what_was_expected(payload, needle) -> None:
    with pytest.raises(ImportInvalid) as caught:
        read_preset(payload)
    assert needle in caught.value.message


def test_r8_2_oversized_preset_is_too_large() -> None:
    with pytest.raises(TooLarge):
        read_preset(b'{"name": "x", "content": "' + b"a" * 200 + b'"}',
                    Limits(max_text_bytes=100))
