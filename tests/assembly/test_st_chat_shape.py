"""The chat-mode prompt has the shape SillyTavern's chat-completion builder gives it
(reference `sillytavern-prompting.md` §2.7, §5, §6.2): personality and scenario formats,
the new-chat line, example blocks of named turns, World Info and in-chat injections joined
per slot, and the continue nudge with its postfix. Every check reads what a real tour sent."""

from __future__ import annotations

from typing import Any

import httpx

from tests.assembly._helpers import chat, connection, messages, send, sent_body

CARD = {
    "spec": "chara_card_v2", "spec_version": "2.0",
    "data": {
        "name": "Eva", "description": "{{char}} keeps the lighthouse.",
        "personality": "calm", "scenario": "A stormy night.",
        "first_mes": "Welcome to the lighthouse.",
        "mes_example": "<START>\n{{user}}: Is it late?\n{{char}}: Very.\nShe smiles.\n"
                       "<START>\n{{char}}: The lamp is lit.",
    },
}
MAIN = "Write Eva's next reply in a fictional chat between Eva and User."


async def _card(client: httpx.AsyncClient, **data: Any) -> str:
    body = {**CARD, "data": {**CARD["data"], **data}}
    r = await client.post("/v1/characters", json=body)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def _sent(client: httpx.AsyncClient, chat_id: str, text: str | None = "Hello",
                **body: Any) -> list[dict[str, Any]]:
    answer = await send(client, chat_id, text, **body)
    return list((await sent_body(client, answer["tour_id"]))["messages"])


def _plain(msgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: m[k] for k in ("role", "name", "content") if k in m} for m in msgs]


async def test_personality_and_scenario_are_sent_in_their_formats(
    client: httpx.AsyncClient,
) -> None:
    character = await _card(client)
    sent = await _sent(client, await chat(client, await connection(client),
                                          character_id=character))
    contents = [m["content"] for m in sent]
    assert contents[:4] == [MAIN, "Eva keeps the lighthouse.", "[Eva's personality: calm]",
                            "[Circumstances and context of the dialogue: A stormy night.]"]
    # the connection's own formats; an empty format leaves the field out (as SillyTavern)
    conn = await connection(client, params={"personality_format": "{{char}} is {{personality}}.",
                                            "scenario_format": ""})
    contents = [m["content"] for m in await _sent(client, await chat(
        client, conn, character_id=character))]
    assert "Eva is calm." in contents
    assert not any("stormy" in c for c in contents)


async def test_the_new_chat_line_opens_the_history_after_the_examples(
    client: httpx.AsyncClient,
) -> None:
    character = await _card(client)
    sent = await _sent(client, await chat(client, await connection(client),
                                          character_id=character))
    contents = [m["content"] for m in sent]
    start = contents.index("[Start a new Chat]")
    assert sent[start]["role"] == "system"
    assert contents[start + 1:] == ["Welcome to the lighthouse.", "Hello"]
    assert start > contents.index("The lamp is lit.")
    conn = await connection(client, params={"new_chat_prompt": "[A new talk with {{char}}]"})
    contents = [m["content"] for m in await _sent(client, await chat(
        client, conn, character_id=character))]
    assert contents[-3:] == ["[A new talk with Eva]", "Welcome to the lighthouse.", "Hello"]


async def test_examples_are_sent_as_example_chat_blocks_of_named_turns(
    client: httpx.AsyncClient,
) -> None:
    character = await _card(client)
    sent = _plain(await _sent(client, await chat(client, await connection(client),
                                                 character_id=character)))
    first = sent.index({"role": "system", "content": "[Example Chat]"})
    assert sent[first:first + 5] == [
        {"role": "system", "content": "[Example Chat]"},
        {"role": "system", "name": "example_user", "content": "Is it late?"},
        {"role": "system", "name": "example_assistant", "content": "Very.\nShe smiles."},
        {"role": "system", "content": "[Example Chat]"},
        {"role": "system", "name": "example_assistant", "content": "The lamp is lit."},
    ]
    conn = await connection(client, params={"new_example_chat_prompt": "<example>"})
    sent = _plain(await _sent(client, await chat(client, conn, character_id=character)))
    assert sum(m["content"] == "<example>" for m in sent) == 2


async def _book(client: httpx.AsyncClient, entries: list[dict[str, Any]]) -> str:
    full = [{"uid": i, "key": [], "constant": True, "comment": f"e{i}", **e}
            for i, e in enumerate(entries)]
    r = await client.post("/v1/lorebooks", json={"name": "Book", "entries": full})
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def test_world_info_before_and_after_are_one_message_each_in_wi_format(
    client: httpx.AsyncClient,
) -> None:
    book = await _book(client, [
        {"content": "Before one.", "position": 0, "order": 1},
        {"content": "Before two.", "position": 0, "order": 2},
        {"content": "After one.", "position": 1, "order": 1},
        {"content": "After two.", "position": 1, "order": 2},
    ])
    character = await _card(client)
    conn = await connection(client)
    contents = [m["content"] for m in await _sent(client, await chat(
        client, conn, character_id=character, lorebook_ids=[book]))]
    assert "Before one.\nBefore two." in contents
    assert contents.index("Before one.\nBefore two.") < contents.index(
        "Eva keeps the lighthouse.") < contents.index("After one.\nAfter two.")
    conn = await connection(client, params={"wi_format": "[Lore: {0}]"})
    contents = [m["content"] for m in await _sent(client, await chat(
        client, conn, character_id=character, lorebook_ids=[book]))]
    assert "[Lore: Before one.\nBefore two.]" in contents
    assert "[Lore: After one.\nAfter two.]" in contents


async def test_each_depth_and_role_group_is_one_message_in_sillytavern_order(
    client: httpx.AsyncClient,
) -> None:
    book = await _book(client, [
        {"content": "Lore system A.", "position": 4, "depth": 1, "role": 0, "order": 1},
        {"content": "Lore system B.", "position": 4, "depth": 1, "role": 0, "order": 2},
        {"content": "Lore user.", "position": 4, "depth": 1, "role": 1},
        {"content": "Lore assistant.", "position": 4, "depth": 1, "role": 2},
        {"content": "Lore deep.", "position": 4, "depth": 3, "role": 0},
    ])
    note = {"text": "The note.", "depth": 1, "role": "system", "position": "in_chat"}
    chat_id = await chat(client, await connection(client), lorebook_ids=[book],
                         settings={"authors_note": note})
    await send(client, chat_id, "first")
    sent = _plain(await _sent(client, chat_id, "second"))
    # assistant, user, then system groups; the author's note first, the lore in its order
    assert [m["role"] for m in sent[-4:]] == ["assistant", "user", "system", "user"]
    contents = [m["content"] for m in sent]
    assert contents[-4:] == ["Lore assistant.", "Lore user.",
                             "The note.\nLore system A.\nLore system B.", "second"]
    # deeper than the history: before the oldest message, after the new-chat line
    assert contents.index("[Start a new Chat]") + 1 == contents.index("Lore deep.")
    assert contents.index("Lore deep.") + 1 == contents.index("first")


async def test_continue_nudges_after_the_history_and_stores_the_postfix(
    client: httpx.AsyncClient,
) -> None:
    conn = await connection(client, params={"script": [
        {"if_prompt_contains": "[Continue the following", "text": "a fox slept."},
        {"text": "Once upon a time"}]})
    chat_id = await chat(client, conn)
    await send(client, chat_id, "Tell me a story.")
    sent = _plain(await _sent(client, chat_id, None, mode="continue"))
    # the text stays in the history; the nudge quotes it; no prefill is sent
    assert sent[-2:] == [
        {"role": "assistant", "content": "Once upon a time"},
        {"role": "system", "content": "[Continue the following message. Do not include ANY "
         "parts of the original message. Use capitalization and punctuation as if your reply "
         "is a part of the original message: Once upon a time]"},
    ]
    stored = await messages(client, chat_id)
    # continue_postfix (a space by default) joins the old text and the continuation
    assert stored[-1]["content"] == "Once upon a time a fox slept."


async def test_continue_with_continue_prefill_sends_the_text_as_the_last_turn(
    client: httpx.AsyncClient,
) -> None:
    conn = await connection(client, params={"continue_prefill": True,
                                            "continue_postfix": "\n"})
    chat_id = await chat(client, conn)
    await send(client, chat_id, "Tell me a story.")
    answer = await send(client, chat_id, None, mode="continue")
    body = await sent_body(client, answer["tour_id"])
    assert _plain(body["messages"])[-1] == {"role": "user", "content": "Tell me a story."}
    said = "(mock) You said: Tell me a story."  # the mock's echo, both times
    assert body["prefill"] == said + "\n"
    stored = await messages(client, chat_id)
    assert stored[-1]["content"] == f"{said}\n{said}"


async def test_the_character_note_is_inserted_at_its_depth_with_its_role(
    client: httpx.AsyncClient,
) -> None:
    note = {"prompt": "{{char}} never lies.", "depth": 1, "role": "user"}
    character = await _card(client, extensions={"depth_prompt": note},
                            description="{{charDepthPrompt}} She keeps the lamp.")
    chat_id = await chat(client, await connection(client), character_id=character)
    sent = _plain(await _sent(client, chat_id, "Hello"))
    # depth 1: before the last message, as a user message
    assert sent[-2:] == [{"role": "user", "content": "Eva never lies."},
                         {"role": "user", "content": "Hello"}]
    # {{charDepthPrompt}} is the card's note
    assert "Eva never lies. She keeps the lamp." in [m["content"] for m in sent]


async def test_the_character_note_joins_the_authors_note_of_the_same_depth_and_role(
    client: httpx.AsyncClient,
) -> None:
    character = await _card(client, extensions={"depth_prompt": {"prompt": "Char note."}})
    authors = {"text": "Author note.", "depth": 4, "role": "system"}
    chat_id = await chat(client, await connection(client), character_id=character,
                         settings={"authors_note": authors})
    for text in ("one", "two", "three"):
        await send(client, chat_id, text)
    contents = [m["content"] for m in await _sent(client, chat_id, "four")]
    # default depth 4, role system: one message, the author's note first
    joined = contents.index("Author note.\nChar note.")
    assert contents[joined + 1:] == ["(mock) You said: two", "three",
                                     "(mock) You said: three", "four"]


async def test_an_example_block_without_speakers_is_kept_as_one_system_message(
    client: httpx.AsyncClient,
) -> None:
    character = await _card(client, mes_example="<START>\nThe lamp hums all night.")
    sent = _plain(await _sent(client, await chat(client, await connection(client),
                                                 character_id=character)))
    assert {"role": "system", "content": "The lamp hums all night."} in sent
    assert {"role": "system", "content": "[Example Chat]"} not in sent
