"""R2.9: text-mode rendering with instruct templates (reference §4.2, §5).

Expected prompts are written out by hand from the reference, not captured from the code.
"""

from __future__ import annotations

import json

import pytest

from evacore.errors import InvalidInput
from evacore.render.instruct import (
    ContextTemplate,
    InstructTemplate,
    bundled_context,
    bundled_instruct,
)
from evacore.render.story import render_story_string
from evacore.render.text import render_text
from tests.helpers import FIXTURES as SHARED_FIXTURES

FIXTURES = SHARED_FIXTURES / "presets"
NAMES = {"char_name": "Seraphina", "user_name": "Anon"}
SYSTEM = "You are Seraphina, guardian of the forest."
CHAT = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": "Hello?"},
    {"role": "assistant", "content": "Welcome, traveler."},
    {"role": "user", "content": "Where am I?"},
]
GREETING_FIRST = [
    {"role": "assistant", "content": "Welcome, traveler."},
    {"role": "user", "content": "Where am I?"},
]
STORY_PARAMS = {
    "system": SYSTEM,
    "description": "Seraphina is a kind forest spirit.",
    "char": "Seraphina",
    "user": "Anon",
}
ALIGN = (
    "Let's get started. Please respond based on the information and instructions provided above."
)


def fixture(kind: str, name: str) -> dict:
    return json.loads((FIXTURES / kind / name).read_text(encoding="utf-8"))


def old_pair(name: str) -> tuple[InstructTemplate, ContextTemplate]:
    return (
        InstructTemplate.from_st(fixture("instruct", name)),
        ContextTemplate.from_st(fixture("context", name)),
    )


# -- the 1.12 fixture presets, system + user + assistant + user ------------------------------


def test_r2_9_chatml_fixture_renders_the_four_message_chat() -> None:
    template, context = old_pair("ChatML.json")
    out = render_text(CHAT, template, context=context, **NAMES)
    assert out.prompt == (
        "<|im_start|>system\nYou are Seraphina, guardian of the forest.<|im_end|>\n"
        "<|im_start|>user\nAnon: Hello?<|im_end|>\n"
        "<|im_start|>assistant\nSeraphina: Welcome, traveler.<|im_end|>\n"
        "<|im_start|>user\nAnon: Where am I?<|im_end|>\n"
        "<|im_start|>assistant\nSeraphina:"
    )
    assert out.stop == [
        "\nAnon:",
        "\n<|im_end|>",
        "\n<|im_start|>user",
        "\n<|im_start|>assistant",
        "\n<|im_start|>system",
    ]


def test_r2_9_llama3_fixture_renders_the_four_message_chat() -> None:
    template, context = old_pair("Llama-3-Instruct.json")
    out = render_text(CHAT, template, context=context, **NAMES)
    # system_same_as_user is on in this preset: the narrator turn takes the user header.
    assert out.prompt == (
        "<|start_header_id|>user<|end_header_id|>\n\n"
        "You are Seraphina, guardian of the forest.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nAnon: Hello?<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nSeraphina: Welcome, traveler.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nAnon: Where am I?<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nSeraphina:"
    )
    assert out.stop == [
        "\nAnon:",
        "<|eot_id|>",
        "<|start_header_id|>user<|end_header_id|>",
        "<|start_header_id|>assistant<|end_header_id|>",
        "<|start_header_id|>system<|end_header_id|>",
    ]


def test_r2_9_mistral_fixture_renders_the_four_message_chat() -> None:
    template, context = old_pair("Mistral-V2-V3.json")
    out = render_text(CHAT, template, context=context, **NAMES)
    assert out.prompt == (
        "[INST] You are Seraphina, guardian of the forest."
        "[INST] Anon: Hello?"
        "[/INST] Seraphina: Welcome, traveler.</s>"
        "[INST] Anon: Where am I?"
        "[/INST] Seraphina:"  # the output sequence's space goes before the name
    )
    assert out.stop == ["\nAnon:", "[INST] ", "[/INST] ", "[/INST]"]


# -- the same presets with their context story strings --------------------------------------


def story(template: InstructTemplate, context: ContextTemplate) -> str:
    return render_story_string(context, STORY_PARAMS, instruct=template)


def test_r2_9_chatml_fixture_with_story_string() -> None:
    template, context = old_pair("ChatML.json")
    out = render_text(
        GREETING_FIRST, template, context=context, story_string=story(template, context), **NAMES
    )
    assert out.prompt == (
        "<|im_start|>system\nYou are Seraphina, guardian of the forest.\n"
        "Seraphina is a kind forest spirit.<|im_end|>\n"
        "<|im_start|>assistant\nSeraphina: Welcome, traveler.<|im_end|>\n"
        "<|im_start|>user\nAnon: Where am I?<|im_end|>\n"
        "<|im_start|>assistant\nSeraphina:"
    )


def test_r2_9_llama3_fixture_with_story_string() -> None:
    template, context = old_pair("Llama-3-Instruct.json")
    out = render_text(
        GREETING_FIRST, template, context=context, story_string=story(template, context), **NAMES
    )
    assert out.prompt == (
        "<|start_header_id|>system<|end_header_id|>\n\nYou are Seraphina, guardian of the forest.\n"
        "Seraphina is a kind forest spirit.<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nSeraphina: Welcome, traveler.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nAnon: Where am I?<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nSeraphina:"
    )


def test_r2_9_mistral_fixture_with_story_string_adds_the_alignment_message() -> None:
    template, context = old_pair("Mistral-V2-V3.json")
    out = render_text(
        GREETING_FIRST, template, context=context, story_string=story(template, context), **NAMES
    )
    assert out.prompt == (
        "[INST] You are Seraphina, guardian of the forest.\n"
        "Seraphina is a kind forest spirit.[/INST] Understood.</s>"
        f"[INST] Anon: {ALIGN}"
        "[/INST] Seraphina: Welcome, traveler.</s>"
        "[INST] Anon: Where am I?"
        "[/INST] Seraphina:"
    )


@pytest.mark.parametrize(
    ("fixture_name", "bundled_name"),
    [
        ("ChatML.json", "ChatML"),
        ("Llama-3-Instruct.json", "Llama 3 Instruct"),
        ("Mistral-V2-V3.json", "Mistral V2 & V3"),
    ],
)
def test_r2_9_bundled_newer_shape_reproduces_the_1_12_prompt(
    fixture_name: str, bundled_name: str
) -> None:
    old_template, old_context = old_pair(fixture_name)
    expected = render_text(
        GREETING_FIRST,
        old_template,
        context=old_context,
        story_string=story(old_template, old_context),
        **NAMES,
    )
    new_template, new_context = bundled_instruct(bundled_name), bundled_context(bundled_name)
    got = render_text(
        GREETING_FIRST,
        new_template,
        context=new_context,
        story_string=story(new_template, new_context),
        names_in_prompt="always",
        **NAMES,
    )
    assert got.prompt == expected.prompt


# -- modes ----------------------------------------------------------------------------------

CHATML = bundled_instruct("ChatML")
CHATML_CONTEXT = bundled_context("ChatML")
SHORT = [
    {"role": "system", "content": "S"},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello, I"},
]


def test_r2_9_normal_generation_line_and_prefill() -> None:
    out = render_text(SHORT[:2], CHATML, context=CHATML_CONTEXT, prefill="Sure,", **NAMES)
    # Wrap on, names off: SillyTavern ends the generation line with the separator.
    assert out.prompt == (
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\nSure,\n"
    )
    named = render_text(
        SHORT[:2],
        CHATML,
        context=CHATML_CONTEXT,
        prefill="Sure,",
        names_in_prompt="always",
        **NAMES,
    )
    assert named.prompt.endswith(
        "<|im_start|>user\nAnon: Hi<|im_end|>\n<|im_start|>assistant\nSeraphina: Sure,"
    )


def test_r2_9_continue_ends_inside_the_last_message() -> None:
    out = render_text(SHORT, CHATML, context=CHATML_CONTEXT, mode="continue", prefill="x", **NAMES)
    assert out.prompt == (
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\nHello, I"
    )
    assert out.stop[0] == "\nAnon:" and "\nSeraphina:" not in out.stop


def test_r2_9_continue_of_a_user_message_stops_on_the_char_name() -> None:
    out = render_text(SHORT[:2], CHATML, context=CHATML_CONTEXT, mode="continue", **NAMES)
    assert out.prompt.endswith("<|im_start|>user\nHi")
    assert out.stop[:2] == ["\nAnon:", "\nSeraphina:"]


def test_r2_9_continue_uses_the_last_output_sequence() -> None:
    template, context = old_pair("Mistral-V2-V3.json")
    out = render_text(GREETING_FIRST[:1], template, context=context, mode="continue", **NAMES)
    assert out.prompt == f"[INST] Anon: {ALIGN}[/INST]Seraphina: Welcome, traveler."


def test_r2_9_impersonate_opens_a_user_turn() -> None:
    out = render_text(SHORT, CHATML, context=CHATML_CONTEXT, mode="impersonate", **NAMES)
    assert out.prompt == (
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\nHello, I<|im_end|>\n<|im_start|>user\n"
    )
    assert out.stop[:2] == ["\nSeraphina:", "\nAnon:"]
    template, context = old_pair("ChatML.json")
    named = render_text(SHORT, template, context=context, mode="impersonate", **NAMES)
    assert named.prompt.endswith("Seraphina: Hello, I<|im_end|>\n<|im_start|>user\nAnon:")


def test_r2_9_quiet_renders_the_instruction_as_a_narrator_turn() -> None:
    chat = [*SHORT, {"role": "user", "content": "Summarize the chat."}]
    out = render_text(chat, CHATML, context=CHATML_CONTEXT, mode="quiet", **NAMES)
    assert out.prompt == (
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\nHello, I<|im_end|>\n"
        "<|im_start|>system\nSummarize the chat.<|im_end|>\n<|im_start|>assistant\n"
    )
    quiet_seq = CHATML.model_copy(update={"last_system_sequence": "<|im_start|>narrator"})
    out = render_text(chat, quiet_seq, context=CHATML_CONTEXT, mode="quiet", **NAMES)
    assert out.prompt.endswith("<|im_end|>\n<|im_start|>narrator\n")


@pytest.mark.parametrize("mode", ["swipe", "Normal", ""])
def test_r2_9_unknown_render_mode_is_rejected(mode: str) -> None:
    with pytest.raises(InvalidInput):
        render_text(SHORT, CHATML, mode=mode, **NAMES)


def test_r2_9_unknown_role_is_rejected() -> None:
    with pytest.raises(InvalidInput):
        render_text([{"role": "wizard", "content": "x"}], CHATML, **NAMES)


# -- first/last sequences, alignment, truncation -------------------------------------------

PLAIN = InstructTemplate(
    input_sequence="U:",
    output_sequence="A:",
    first_output_sequence="A1:",
    last_input_sequence="UL:",
    names_behavior="none",
    wrap=True,
)
FOUR = [
    {"role": "assistant", "content": "g"},
    {"role": "user", "content": "a"},
    {"role": "assistant", "content": "b"},
    {"role": "user", "content": "c"},
]


def test_r2_9_first_and_last_sequences() -> None:
    out = render_text(FOUR, PLAIN, **NAMES)
    assert out.prompt == "A1:\ng\nU:\na\nA:\nb\nUL:\nc\nA:\n"


def test_r2_9_a_truncated_chat_has_no_first_message() -> None:
    out = render_text(FOUR, PLAIN, chat_truncated=True, **NAMES)
    assert out.prompt == "A:\ng\nU:\na\nA:\nb\nUL:\nc\nA:\n"


def test_r2_9_alignment_message_follows_leading_system_turns() -> None:
    mistral = bundled_instruct("Mistral V2 & V3")
    chat = [{"role": "system", "content": "S"}, *GREETING_FIRST]
    out = render_text(chat, mistral, **NAMES)
    assert out.prompt == (
        f"[INST] S[INST] {ALIGN}[/INST] Welcome, traveler.</s>[INST] Where am I?[/INST]"
    )
    user_first = render_text(chat[:1] + chat[2:], mistral, **NAMES)
    assert ALIGN not in user_first.prompt


# -- names, groups, macros -----------------------------------------------------------------


def test_r2_9_force_names_apply_in_groups_and_stop_on_other_members() -> None:
    chat = [
        {"role": "user", "content": "Hi all"},
        {"role": "assistant", "name": "Lilith", "content": "Hey."},
    ]
    out = render_text(
        chat, CHATML, context=CHATML_CONTEXT, group_names=["Seraphina", "Lilith"], **NAMES
    )
    assert out.prompt == (
        "<|im_start|>user\nHi all<|im_end|>\n"
        "<|im_start|>assistant\nLilith: Hey.<|im_end|>\n"
        "<|im_start|>assistant\nSeraphina:"
    )
    assert out.stop[:2] == ["\nAnon:", "\nLilith:"]


def test_r2_9_forced_avatar_message_gets_its_name_outside_groups() -> None:
    chat = [{"role": "assistant", "name": "Narrator", "content": "Rain.", "force_avatar": True}]
    out = render_text(chat, CHATML, **NAMES)
    assert out.prompt.startswith("<|im_start|>assistant\nNarrator: Rain.<|im_end|>")


def test_r2_9_name_macros_inside_sequences() -> None:
    names = InstructTemplate(
        input_sequence="<|im_start|>[{{name}}]",
        output_sequence="<|im_start|>[{{name}}]",
        input_suffix="<|im_end|>\n",
        output_suffix="<|im_end|>\n",
        stop_sequence="<|im_end|>",
        system_sequence="<|im_start|>{{name}}",
        system_suffix="<|im_end|>\n",
        names_behavior="none",
    )
    chat = [{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"}]
    out = render_text(chat, names, **NAMES)
    assert out.prompt == (
        "<|im_start|>System\nS<|im_end|>\n<|im_start|>[Anon]\nHi<|im_end|>\n<|im_start|>[Seraphina]\n"
    )
    assert out.stop == [
        "\nAnon:",
        "\n<|im_end|>",
        "\n<|im_start|>[Anon]",
        "\n<|im_start|>[Seraphina]",
        "\n<|im_start|>System",
    ]
    raw = render_text(chat, names.model_copy(update={"macro": False}), **NAMES)
    assert "<|im_start|>[{{name}}]\nHi" in raw.prompt


def test_r2_9_expand_hook_reaches_sequences() -> None:
    template = InstructTemplate(input_sequence="{{time}} U:", output_sequence="A:", wrap=False)
    out = render_text(
        [{"role": "user", "content": "x"}],
        template,
        expand=lambda s: s.replace("{{time}}", "9am"),
        **NAMES,
    )
    assert out.prompt == "9am U:xA:"


# -- examples, chat start, in-chat story ---------------------------------------------------

EXAMPLE = "<START>\n{{user}}: Hi\n{{char}}: *waves* Hello\nHow are you?"


def test_r2_9_examples_and_chat_start_with_default_context() -> None:
    out = render_text(
        [{"role": "user", "content": "Hi again"}],
        CHATML,
        context=bundled_context("Default"),
        examples=[EXAMPLE],
        **NAMES,
    )
    assert out.prompt == (
        "***\n"
        "<|im_start|>user\nAnon: Hi<|im_end|>\n"
        "<|im_start|>assistant\n*waves* Hello\nHow are you?<|im_end|>\n"
        "***\n"
        "<|im_start|>user\nHi again<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_r2_9_skip_examples_keeps_raw_text_and_use_stop_strings_adds_markers() -> None:
    context = bundled_context("Default").model_copy(update={"use_stop_strings": True})
    out = render_text(
        [{"role": "user", "content": "Hi again"}],
        CHATML.model_copy(update={"skip_examples": True}),
        context=context,
        examples=[EXAMPLE],
        **NAMES,
    )
    assert out.prompt.startswith("***\nAnon: Hi\nSeraphina: *waves* Hello\nHow are you?\n***\n")
    assert out.stop[-1] == "\n***" and out.stop.count("\n***") == 1


def test_r2_9_story_string_in_chat_is_injected_at_depth() -> None:
    context = CHATML_CONTEXT.model_copy(
        update={"story_string_position": 1, "story_string_depth": 1}
    )
    chat = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Yo"},
        {"role": "user", "content": "Q"},
    ]
    out = render_text(chat, CHATML, context=context, story_string="STORY", **NAMES)
    assert out.prompt == (
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nYo<|im_end|>\n"
        "<|im_start|>system\nSTORY<|im_end|>\n"
        "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n"
    )


def test_r2_9_single_line_and_custom_stops() -> None:
    context = CHATML_CONTEXT.model_copy(
        update={"single_line": True, "names_as_stop_strings": False}
    )
    out = render_text(SHORT, CHATML, context=context, stop=["END", "\n<|im_end|>"], **NAMES)
    assert out.stop == [
        "\n",
        "\n<|im_end|>",
        "\n<|im_start|>user",
        "\n<|im_start|>assistant",
        "\n<|im_start|>system",
        "END",
    ]


def test_r2_9_render_text_leaves_the_messages_unchanged() -> None:
    chat = [
        {"role": "system", "content": [{"type": "text", "text": "S"}]},
        {"role": "user", "name": "Anon", "content": "Hi"},
        {"role": "assistant", "content": "Yo", "tool_calls": []},
    ]
    before = json.loads(json.dumps(chat))
    for mode in ("normal", "continue", "impersonate", "quiet"):
        render_text(chat, CHATML, context=CHATML_CONTEXT, mode=mode, story_string="X", **NAMES)
    assert chat == before
