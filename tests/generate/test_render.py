"""R2.9, R4, R12.7 end to end: SillyTavern preset files imported over the API render a known
chat into exactly the expected text prompt at the openai-text fake; a Jinja chat template
renders the same chat; chat connections post-process the array per their `postprocess`."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from evacore.core import Core
from evacore.render import InstructTemplate, render_chat_template, render_text
from evacore.store.tables import Preset
from tests.fakes.upstream import FakeUpstream
from tests.generate.helpers import fake_connection, new_chat, stream
from tests.helpers import FIXTURES

PRESETS = FIXTURES / "presets"
CARD = {
    "spec": "chara_card_v2", "spec_version": "2.0",
    "data": {"name": "Eva", "description": "{{char}} keeps the lighthouse.",
             "personality": "calm", "scenario": "A stormy night.",
             "first_mes": "Welcome to the lighthouse."},
}
MAIN = "Write Eva's next reply in a fictional chat between Eva and User."

# Written by hand from reference §4 (1.12 preset shapes, names_behavior "always").
EXPECTED = {
    "ChatML": (
        "<|im_start|>system\n"
        f"{MAIN}\nEva keeps the lighthouse.\nEva's personality: calm\nScenario: A stormy night."
        "<|im_end|>\n"
        "<|im_start|>assistant\nEva: Welcome to the lighthouse.<|im_end|>\n"
        "<|im_start|>user\nUser: How are you?<|im_end|>\n"
        "<|im_start|>assistant\nEva:"
    ),
    "Llama-3-Instruct": (
        "<|start_header_id|>system<|end_header_id|>\n\n"
        f"{MAIN}\nEva keeps the lighthouse.\nEva's personality: calm\nScenario: A stormy night."
        "<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nEva: Welcome to the lighthouse.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nUser: How are you?<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nEva:"
    ),
    # Mistral: the chat opens with the greeting, so the user alignment message goes first.
    "Mistral-V2-V3": (
        f"[INST] {MAIN}\nEva keeps the lighthouse.\ncalm\nA stormy night.[/INST] Understood.</s>"
        "[INST] User: Let's get started. Please respond based on the information and "
        "instructions provided above."
        "[/INST] Eva: Welcome to the lighthouse.</s>"
        "[INST] User: How are you?"
        "[/INST] Eva:"
    ),
}
STOPS = {  # 1.12 shapes: every instruct sequence is a stop string (suffixes are not)
    "ChatML": "\n<|im_end|>", "Llama-3-Instruct": "<|eot_id|>", "Mistral-V2-V3": "[INST] ",
}


async def import_preset(client: httpx.AsyncClient, core: Core, path: Path, kind: str) -> str:
    """Import a SillyTavern preset file over the API (rows in `presets` if it is missing)."""
    r = await client.post("/v1/presets/import",
                          files={"file": (path.name, path.read_bytes(), "application/json")})
    if r.status_code in (404, 405):
        import json

        data = json.loads(path.read_text())
        async with core.session() as s:
            row = Preset(kind=kind, name=data["name"], data=data)
            s.add(row)
            await s.flush()
            return row.id
    assert r.status_code == 201, r.text
    [preset] = r.json()["presets"]
    assert preset["kind"] == kind
    return preset["id"]


async def _eva_chat(client: httpx.AsyncClient, connection_id: str) -> str:
    r = await client.post("/v1/characters", json=CARD)
    assert r.status_code == 201, r.text
    return await new_chat(client, connection_id, character_id=r.json()["id"])


@pytest.mark.parametrize("name", sorted(EXPECTED))
async def test_r2_9_fixture_presets_render_a_known_chat_exactly(
    client: httpx.AsyncClient, core: Core, openai_text_fake: FakeUpstream, name: str
) -> None:
    instruct = await import_preset(client, core, PRESETS / "instruct" / f"{name}.json",
                                   "instruct")
    context = await import_preset(client, core, PRESETS / "context" / f"{name}.json", "context")
    conn = await fake_connection(client, openai_text_fake,
                                 instruct={"preset": instruct, "context": context})
    chat = await _eva_chat(client, conn)
    openai_text_fake.script.reply("I am well.")
    events = await stream(client, chat, "How are you?")
    assert events[-1][0] == "done", events
    body = openai_text_fake.last_body
    assert body["prompt"] == EXPECTED[name]
    assert STOPS[name] in body["stop"] and "\nUser:" in body["stop"]


async def test_r2_9_newer_preset_story_prefix_wraps_the_story_once(
    client: httpx.AsyncClient, core: Core, openai_text_fake: FakeUpstream
) -> None:
    instruct = await import_preset(client, core, PRESETS / "newer" / "instruct-ChatML.json",
                                   "instruct")
    conn = await fake_connection(client, openai_text_fake,
                                 instruct={"preset": instruct, "context": "Default"})
    chat = await _eva_chat(client, conn)
    openai_text_fake.script.reply("I am well.")
    await stream(client, chat, "How are you?")
    assert openai_text_fake.last_body["prompt"] == (
        "<|im_start|>system\n"
        f"{MAIN}\nEva keeps the lighthouse.\nEva's personality: calm\nScenario: A stormy night.\n"
        "<|im_end|>\n"
        "***\n"  # the Default context's chat start
        "<|im_start|>assistant\nWelcome to the lighthouse.<|im_end|>\n"  # names: force
        "<|im_start|>user\nHow are you?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


CHATML_JINJA = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
LLAMA3_JINJA = (
    "{% for message in messages %}{% set content = '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' %}"
    "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    "{% endif %}"
)
CHAT = [
    {"role": "system", "content": MAIN},
    {"role": "assistant", "content": "Welcome to the lighthouse."},
    {"role": "user", "content": "How are you?"},
]


def test_r2_9_jinja_chat_templates_render_the_same_chat() -> None:
    chatml = render_chat_template(CHATML_JINJA, CHAT)
    assert chatml == (
        f"<|im_start|>system\n{MAIN}<|im_end|>\n"
        "<|im_start|>assistant\nWelcome to the lighthouse.<|im_end|>\n"
        "<|im_start|>user\nHow are you?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    # the newer ChatML instruct preset (story prefix/suffix, names only when forced) agrees
    newer = InstructTemplate.from_st(
        __import__("json").loads((PRESETS / "newer" / "instruct-ChatML.json").read_text()))
    text = render_text(CHAT[1:], newer, story_string=MAIN, char_name="Eva", user_name="User")
    assert text.prompt == chatml
    llama = render_chat_template(LLAMA3_JINJA, CHAT, bos_token="<|begin_of_text|>")
    assert llama == (
        "<|begin_of_text|>"
        f"<|start_header_id|>system<|end_header_id|>\n\n{MAIN}<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nWelcome to the lighthouse.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHow are you?<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )


# chat completion: personality and scenario in SillyTavern's default formats, and its
# new-chat line before the history
SYSTEM_PARTS = [MAIN, "Eva keeps the lighthouse.", "[Eva's personality: calm]",
                "[Circumstances and context of the dialogue: A stormy night.]",
                "[Start a new Chat]"]
POSTPROCESSED = {
    "none": [
        *({"role": "system", "content": c} for c in SYSTEM_PARTS),
        {"role": "assistant", "content": "Welcome to the lighthouse."},
        {"role": "user", "content": "How are you?"},
    ],
    "merge": [
        {"role": "system", "content": "\n\n".join(SYSTEM_PARTS)},
        {"role": "assistant", "content": "Welcome to the lighthouse."},
        {"role": "user", "content": "How are you?"},
    ],
    "strict": [  # squashed, and the placeholder user turn before the greeting
        {"role": "system", "content": "\n\n".join(SYSTEM_PARTS)},
        {"role": "user", "content": "Let's get started."},
        {"role": "assistant", "content": "Welcome to the lighthouse."},
        {"role": "user", "content": "How are you?"},
    ],
    "single": [
        {"role": "user", "content": "\n\n".join(
            [*SYSTEM_PARTS, "Eva: Welcome to the lighthouse.", "User: How are you?"])},
    ],
}


async def test_r4_connection_postprocess_mode_shapes_what_the_provider_gets(
    client: httpx.AsyncClient, openai_fake: FakeUpstream
) -> None:
    r = await client.post("/v1/characters", json=CARD)
    assert r.status_code == 201, r.text
    for mode, expected in POSTPROCESSED.items():
        conn = await fake_connection(client, openai_fake, postprocess=mode)
        chat = await new_chat(client, conn, character_id=r.json()["id"])
        openai_fake.script.reply("I am well.")
        await stream(client, chat, "How are you?")
        sent = openai_fake.last_body["messages"]
        assert [{k: m[k] for k in ("role", "content")} for m in sent] == expected, mode
