"""R2.3, R2.9: the fixture cards assemble into the expected prompt elements through real
tours: ids, order and text in chat mode, greetings as variants, and the ChatML text prompt."""

from __future__ import annotations

import re
from typing import Any

import httpx

from tests.assembly._helpers import (
    AQUA,
    CARDS,
    added_by,
    card_of,
    chat,
    connection,
    import_card,
    messages,
    persona,
    send,
    tour,
)

USER = "Robin"
PERSONA_TEXT = "{{user}} walks the old roads."
POST_DEFAULT = "Reply as {{char}} only."


def resolve(text: str, char: str) -> str:
    """The fixture cards use no macros but `{{char}}` and `{{user}}`."""
    return text.replace("{{char}}", char).replace("{{user}}", USER)


def example_blocks(raw: str) -> list[str]:
    """Blocks as SillyTavern splits them (CRLF line ends normalised)."""
    raw = raw.replace("\r\n", "\n")
    return [b.strip() for b in re.split(r"<START>", raw, flags=re.IGNORECASE) if b.strip()]


def is_subsequence(wanted: list[Any], seq: list[Any]) -> bool:
    it = iter(seq)
    return all(any(w == s for s in it) for w in wanted)


def example_messages(block: str, char: str) -> list[dict[str, str]]:
    """An example block as SillyTavern's chat-completion builder sends it: `[Example Chat]`,
    then a system message per turn named `example_user` / `example_assistant`, the speaker's
    `Name:` removed."""
    out = [{"role": "system", "content": "[Example Chat]"}]
    who, lines = "", []
    for line in resolve(block, char).split("\n"):
        now = "user" if line.startswith(f"{USER}:") else "char" if line.startswith(
            f"{char}:") else ""
        if now and who and now != who:
            out.append(_example(who, lines, char))
            lines = []
        who = now or who
        lines.append(line)
    if who:
        out.append(_example(who, lines, char))
    return out if len(out) > 1 else []


def _example(who: str, lines: list[str], char: str) -> dict[str, str]:
    name = USER if who == "user" else char
    return {"role": "system", "name": "example_user" if who == "user" else "example_assistant",
            "content": "\n".join(lines).replace(f"{name}:", "", 1).strip()}


async def test_r2_3_fixture_cards_assemble_in_chat_mode(client: httpx.AsyncClient) -> None:
    persona_id = await persona(client, USER, PERSONA_TEXT)
    conn = await connection(client, params={"post_history": POST_DEFAULT})
    files = sorted(p.name for p in CARDS.glob("*.png"))
    assert len(files) == 6
    for filename in files:
        data = card_of(filename).data
        name = data["name"]
        chat_id = await chat(client, conn, character_id=await import_card(client, filename),
                             persona_id=persona_id)
        greetings = [g for g in [data.get("first_mes") or "",
                                 *(data.get("alternate_greetings") or [])] if g.strip()]
        stored = await messages(client, chat_id)
        if greetings:  # greeting and alternates are the first message's variants
            first = stored[0]
            assert first["role"] == "assistant", filename
            assert [v["content"] for v in first["variants"]] == [resolve(g, name)
                                                                for g in greetings]
            assert first["active_variant"] == first["variants"][0]["id"]
            assert first["content"] == resolve(greetings[0], name)
        else:
            assert stored == []

        answer = await send(client, chat_id, "Hello {{char}}, I am {{user}}.")
        diagnostics = (await tour(client, answer["tour_id"]))["diagnostics"]
        stored = await messages(client, chat_id)
        user_msg = next(m for m in stored if m["role"] == "user")
        blocks = [example_messages(b, name) for b in example_blocks(data.get("mes_example")
                                                                     or "")]
        blocks = [b for b in blocks if b]
        history = [f"history:{m['id']}" for m in stored[: len(stored) - 1]]
        example_ids = [f"examples:{i}" + (f":{j - 1}" if j else "")
                       for i, b in enumerate(blocks) for j in range(len(b))]
        assert added_by(diagnostics, "character") == [
            "main", "persona", "card.description", "card.personality", "card.scenario",
            *example_ids, *history, "new_chat", "post_history",
        ], filename
        assert history[-1] == f"history:{user_msg['id']}"

        expected: list[dict[str, str]] = [
            {"role": "system", "content": f"Write {name}'s next reply in a fictional chat "
                                          f"between {name} and {USER}."},
            {"role": "system", "content": resolve(PERSONA_TEXT, name)},
        ]
        if (data.get("description") or "").strip():
            expected.append({"role": "system", "content": resolve(data["description"], name)})
        if (data.get("personality") or "").strip():  # personality_format
            expected.append({"role": "system", "content": f"[{name}'s personality: "
                             f"{resolve(data['personality'], name)}]"})
        if (data.get("scenario") or "").strip():  # scenario_format
            expected.append({"role": "system", "content": "[Circumstances and context of the "
                             f"dialogue: {resolve(data['scenario'], name)}]"})
        expected += [m for b in blocks for m in b]
        expected.append({"role": "system", "content": "[Start a new Chat]"})
        if greetings:
            expected.append({"role": "assistant", "content": resolve(greetings[0], name)})
        expected.append({"role": "user", "content": f"Hello {name}, I am {USER}."})
        expected.append({"role": "system", "content": resolve(POST_DEFAULT, name)})

        sent = [{k: m[k] for k in ("role", "name", "content") if k in m}
                for m in (await tour(client, answer["tour_id"]))["diagnostics"]["requests"][0]
                ["body"]["messages"]]
        inserted = len(added_by(diagnostics, "lorebook")) + len(added_by(diagnostics, "memory"))
        assert sent[0] == expected[0] and sent[-1] == expected[-1], filename
        assert len(sent) <= len(expected) + inserted, filename
        assert is_subsequence(expected, sent), filename
        # the stored user message is the input as resolved for this tour
        assert user_msg["content"] == f"Hello {name}, I am {USER}."


async def test_r2_3_authors_note_positions(client: httpx.AsyncClient) -> None:
    """Top / bottom: before / after the main prompt; in chat: at its depth from the end."""
    main = "Write Assistant's next reply in a fictional chat between Assistant and User."
    seen = {}
    for position in ("top", "bottom", "in_chat"):
        note = {"text": f"Note {position} for {{{{char}}}}.", "position": position,
                "depth": 1, "role": "system"}
        chat_id = await chat(client, settings={"authors_note": note})
        await send(client, chat_id, "first")
        answer = await send(client, chat_id, "second")
        body = (await tour(client, answer["tour_id"]))["diagnostics"]["requests"][0]["body"]
        seen[position] = [m["content"] for m in body["messages"]]
    assert seen["top"][:2] == ["Note top for Assistant.", main]
    assert seen["bottom"][:2] == [main, "Note bottom for Assistant."]
    assert seen["in_chat"][-2:] == ["Note in_chat for Assistant.", "second"]


async def test_r2_3_prompt_order_is_configurable(client: httpx.AsyncClient) -> None:
    conn = await connection(client, params={"prompt_order": [
        "history", "main", "description", "post_history"]})
    character = await import_card(client, AQUA)
    chat_id = await chat(client, conn, character_id=character)
    answer = await send(client, chat_id, "hi")
    diagnostics = (await tour(client, answer["tour_id"]))["diagnostics"]
    added = added_by(diagnostics, "character")
    # no post-history instructions: no (empty) element for them
    assert [a.split(":")[0] for a in added] == ["history", "history", "new_chat", "main",
                                               "card.description"]
    # the chat's own order wins over the connection's
    r = await client.patch(f"/v1/chats/{chat_id}", json={"settings": {
        "prompt_order": ["main", "scenario", "history"]}})
    assert r.status_code == 200, r.text
    answer = await send(client, chat_id, "again")
    diagnostics = (await tour(client, answer["tour_id"]))["diagnostics"]
    added = added_by(diagnostics, "character")
    assert added[:2] == ["main", "card.scenario"]
    assert all(a.startswith("history:") for a in added[2:-1]) and len(added) == 7
    assert added[-1] == "new_chat"


async def _text_prompts(client: httpx.AsyncClient, fake: Any) -> list[str]:
    """Aqua through two openai-text connections: ChatML, and ChatML with the Default
    context (whose example separator is `***`); returns both sent prompts."""
    persona_id = await persona(client, USER, PERSONA_TEXT)
    character = await import_card(client, AQUA)
    common = {"base_url": fake.base_url, "api_key": "k", "model": "fake-model",
              "context_size": 8192, "max_tokens": 256}
    prompts = []
    for instruct in ("ChatML", {"preset": "ChatML", "context": "Default"}):
        conn = await connection(client, "openai-text", instruct=instruct, **common)
        chat_id = await chat(client, conn, character_id=character, persona_id=persona_id)
        fake.script.reply("Hi there.")
        answer = await send(client, chat_id, "Hello {{char}}")
        body = (await tour(client, answer["tour_id"]))["diagnostics"]["requests"][0]["body"]
        prompts.append(body["prompt"])
    return prompts


AQUA_DATA = card_of(AQUA).data
STORY = (f"<|im_start|>system\nWrite Aqua's next reply in a fictional chat between Aqua and "
         f"{USER}.\n{AQUA_DATA['description']}\nAqua's personality: {AQUA_DATA['personality']}\n"
         f"Scenario: {AQUA_DATA['scenario']}\n{USER} walks the old roads.<|im_end|>\n")
GREETING = f"<|im_start|>assistant\n{AQUA_DATA['first_mes']}<|im_end|>\n"
ENDING = "<|im_start|>user\nHello Aqua<|im_end|>\n<|im_start|>assistant\n"


def chatml_examples() -> list[str]:
    """Aqua's example blocks as ChatML turns (user lines keep the speaker name, as the
    bundled ChatML preset's `force` names behaviour shows it)."""
    out = []
    for block in example_blocks(AQUA_DATA["mes_example"]):
        lines = []
        for line in resolve(block, "Aqua").split("\n"):
            if line.startswith(f"{USER}:"):
                lines.append(f"<|im_start|>user\n{line}<|im_end|>\n")
            elif line.startswith("Aqua:"):
                lines.append(f"<|im_start|>assistant\n{line[len('Aqua:'):].strip()}"
                             "<|im_end|>\n")
        out.append("".join(lines))
    return out


async def test_r2_9_card_in_chatml_text_mode(client: httpx.AsyncClient,
                                            openai_text_fake: Any) -> None:
    plain, separated = await _text_prompts(client, openai_text_fake)
    # the story string carries system prompt, description, personality, scenario, persona
    assert plain.startswith(STORY)
    # the chat: greeting, the input, then the open assistant turn
    assert plain.endswith(GREETING + ENDING)
    assert separated.endswith(GREETING + ENDING)
    for key in ("description", "personality", "scenario"):
        assert AQUA_DATA[key] in separated
    assert "{{" not in plain and "{{" not in separated


async def test_r2_9_examples_in_chatml_text_mode(client: httpx.AsyncClient,
                                                openai_text_fake: Any) -> None:
    plain, separated = await _text_prompts(client, openai_text_fake)
    examples = chatml_examples()
    assert len(examples) == 2 and all(e.count("<|im_start|>") == 4 - 2 * i
                                      for i, e in enumerate(examples))
    assert plain == STORY + "".join(examples) + GREETING + ENDING
    # with the Default context each example block opens with the separator
    for block in examples:
        assert f"***\n{block}" in separated
