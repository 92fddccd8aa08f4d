"""Golden prompts of a real card: Seraphina (SillyTavern's default character, with her
embedded book), a persona, an author's note at depth 1 and one example block, as the
chat-mode prompt and as the text prompt of the bundled ChatML, Llama 3 and Mistral
presets. Every expected value is written out from the reference
(`sillytavern-prompting.md` §2.7, §4.2-§4.4, §6.2), not taken from evacore's output."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.assembly._helpers import (
    SERAPHINA,
    card_of,
    chat,
    connection,
    import_card,
    persona,
    send,
    sent_body,
)

USER = "Robin"
DATA = card_of(SERAPHINA).data
EXAMPLES = "<START>\n{{user}}: Where am I?\n{{char}}: *She smiles.* In my glade."
NOTE = {"text": "Keep {{char}} gentle.", "depth": 1, "role": "system", "position": "in_chat"}
INPUT = "Hello there."


def resolve(text: str) -> str:
    return text.replace("{{char}}", "Seraphina").replace("{{user}}", USER)


MAIN = f"Write Seraphina's next reply in a fictional chat between Seraphina and {USER}."
PERSONA = f"{USER} is a wandering cartographer."
DESCRIPTION = resolve(DATA["description"])
GREETING = resolve(DATA["first_mes"])
# The greeting names the forest, the beasts and magic: entries 0, 1 and 3 of the book fire
# (scan depth 2: the greeting and the input). All have order 100, so SillyTavern's output
# order is ascending order with ties in reverse activation order: 3, 1, 0.
BOOK = DATA["character_book"]["entries"]
WI_BEFORE = "\n".join(resolve(BOOK[i]["content"]) for i in (3, 1, 0))


async def _setup(client: httpx.AsyncClient, conn: str) -> str:
    character = await import_card(client, SERAPHINA)
    r = await client.patch(f"/v1/characters/{character}", json={"data": {
        "mes_example": EXAMPLES}})
    assert r.status_code == 200, r.text
    persona_id = await persona(client, USER, "{{user}} is a wandering cartographer.")
    return await chat(client, conn, character_id=character, persona_id=persona_id,
                      settings={"authors_note": NOTE})


async def test_golden_seraphina_chat_mode_prompt(client: httpx.AsyncClient) -> None:
    chat_id = await _setup(client, await connection(client))
    answer = await send(client, chat_id, INPUT)
    sent = (await sent_body(client, answer["tour_id"]))["messages"]
    assert sent == [
        {"role": "system", "content": MAIN},
        {"role": "system", "content": WI_BEFORE},  # worldInfoBefore: one message, `{0}`
        {"role": "system", "content": PERSONA},
        {"role": "system", "content": DESCRIPTION},
        # no personality or scenario on this card: nothing for their formats
        {"role": "system", "content": "[Example Chat]"},
        {"role": "system", "name": "example_user", "content": "Where am I?"},
        {"role": "system", "name": "example_assistant", "content": "*She smiles.* In my glade."},
        {"role": "system", "content": "[Start a new Chat]"},
        {"role": "assistant", "content": GREETING},
        {"role": "system", "content": "Keep Seraphina gentle."},  # depth 1
        {"role": "user", "content": INPUT},
    ]


# the story string: system, wiBefore, description, persona, each on its line, trimmed
STORY = f"{MAIN}\n{WI_BEFORE}\n{DESCRIPTION}\n{PERSONA}"
GOLDEN_TEXT = {
    # wrap on: sequences and text joined by "\n"; names "force": the user's example line
    # keeps its name, nothing else is named in a one-to-one chat; the author's note is a
    # narrator (system) turn
    "ChatML": (
        f"<|im_start|>system\n{STORY}<|im_end|>\n"
        f"<|im_start|>user\n{USER}: Where am I?<|im_end|>\n"
        "<|im_start|>assistant\n*She smiles.* In my glade.<|im_end|>\n"
        f"<|im_start|>assistant\n{GREETING}<|im_end|>\n"
        "<|im_start|>system\nKeep Seraphina gentle.<|im_end|>\n"
        f"<|im_start|>user\n{INPUT}<|im_end|>\n"
        "<|im_start|>assistant\n"
    ),
    # wrap off: the sequences carry their own newlines
    "Llama 3 Instruct": (
        f"<|start_header_id|>system<|end_header_id|>\n\n{STORY}<|eot_id|>"
        f"<|start_header_id|>user<|end_header_id|>\n\n{USER}: Where am I?<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n*She smiles.* In my glade.<|eot_id|>"
        f"<|start_header_id|>assistant<|end_header_id|>\n\n{GREETING}<|eot_id|>"
        "<|start_header_id|>system<|end_header_id|>\n\nKeep Seraphina gentle.<|eot_id|>"
        f"<|start_header_id|>user<|end_header_id|>\n\n{INPUT}<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    ),
    # system turns use the user sequences; the alignment message goes first because the
    # oldest message kept is the greeting; the last output sequence opens the reply
    "Mistral V2 & V3": (
        f"[INST] {STORY}[/INST] Understood.</s>"
        f"[INST] {USER}: Where am I?"
        "[/INST] *She smiles.* In my glade.</s>"
        "[INST] Let's get started. Please respond based on the information and instructions "
        "provided above."
        f"[/INST] {GREETING}</s>"
        "[INST] Keep Seraphina gentle."
        f"[INST] {INPUT}"
        "[/INST]"
    ),
}


@pytest.mark.parametrize("preset", sorted(GOLDEN_TEXT))
async def test_golden_seraphina_text_mode_prompt(client: httpx.AsyncClient,
                                                 openai_text_fake: Any, preset: str) -> None:
    conn = await connection(client, "openai-text", instruct=preset,
                            base_url=openai_text_fake.base_url, api_key="k", model="m")
    chat_id = await _setup(client, conn)
    openai_text_fake.script.reply("ok")
    answer = await send(client, chat_id, INPUT)
    # the text-completion prompt has its carriage returns stripped (reference §6.1)
    expected = GOLDEN_TEXT[preset].replace("\r", "")
    assert (await sent_body(client, answer["tour_id"]))["prompt"] == expected
