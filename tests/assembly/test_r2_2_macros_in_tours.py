"""R2.2, R2.3: macros through real tours: chat and global variables persist, `{{pick}}` is
stable per chat, unknown macros reach the provider as written, `{{original}}` in a card."""

from __future__ import annotations

from typing import Any

import httpx

from tests.assembly._helpers import chat, chat_json, connection, send, sent_body

PICKS = " ".join(f"{{{{pick::{'::'.join(f'w{i}{j}' for j in range(10))}}}}}" for i in range(8))


def _last_user(body: dict[str, Any]) -> str:
    return next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")


def _users(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "user"]


async def test_r2_2_chat_variables_persist_across_tours(client: httpx.AsyncClient) -> None:
    chat_id = await chat(client)
    first = await send(client, chat_id, "a{{setvar::x::1}}b")
    assert first["content"].endswith("ab")
    second = await send(client, chat_id, "n={{incvar::x}}")
    assert second["content"].endswith("n=2")
    third = await send(client, chat_id, "v={{getvar::x}}")
    assert third["content"].endswith("v=2")
    assert str((await chat_json(client, chat_id))["variables"]["x"]) == "2"
    # earlier inputs are sent as they were resolved, not evaluated again each tour
    body = await sent_body(client, third["tour_id"])
    assert _users(body) == ["ab", "n=2", "v=2"]
    fourth = await send(client, chat_id, "still {{getvar::x}}")
    assert fourth["content"].endswith("still 2")


async def test_r2_2_authors_note_variables_count_each_tour(client: httpx.AsyncClient) -> None:
    note = {"text": "Tour number {{incvar::n}}.", "depth": 0, "role": "system"}
    chat_id = await chat(client, settings={"authors_note": note})
    seen = []
    for i in range(3):
        answer = await send(client, chat_id, f"hello {i}")
        body = await sent_body(client, answer["tour_id"])
        seen.append([m["content"] for m in body["messages"] if m["content"].startswith("Tour")])
    assert seen == [["Tour number 1."], ["Tour number 2."], ["Tour number 3."]]
    assert str((await chat_json(client, chat_id))["variables"]["n"]) == "3"


async def test_r2_2_global_variables_cross_chats(client: httpx.AsyncClient) -> None:
    one, two = await chat(client), await chat(client)
    await send(client, one, "{{setglobalvar::mood::sunny}}ok")
    answer = await send(client, two, "mood is {{getglobalvar::mood}}")
    assert answer["content"].endswith("mood is sunny")
    await send(client, two, "{{incglobalvar::visits}}")
    answer = await send(client, one, "visits {{getglobalvar::visits}}")
    assert answer["content"].endswith("visits 1")
    # chat variables stay per chat
    await send(client, one, "{{setvar::local::1}}")
    answer = await send(client, two, "local=[{{getvar::local}}]")
    assert answer["content"].endswith("local=[]")


async def test_r2_2_pick_is_stable_per_chat_across_tours(client: httpx.AsyncClient) -> None:
    note = {"text": f"Picks: {PICKS}", "depth": 0, "role": "system"}

    async def picks_of(chat_id: str, text: str) -> str:
        body = await sent_body(client, (await send(client, chat_id, text))["tour_id"])
        return next(m["content"] for m in body["messages"] if m["content"].startswith("Picks:"))

    one = await chat(client, settings={"authors_note": note})
    two = await chat(client, settings={"authors_note": note})
    runs = [await picks_of(one, f"turn {i}") for i in range(3)]
    assert "{{" not in runs[0] and len(runs[0].split()) == 9
    assert runs[0] == runs[1] == runs[2]
    # another chat draws its own picks (8 picks of 10: equal by chance with p = 1e-8)
    assert await picks_of(two, "turn 0") != runs[0]


async def test_r2_2_unknown_macro_reaches_provider_unchanged(client: httpx.AsyncClient) -> None:
    chat_id = await chat(client)
    text = "keep {{nope}} and {{nope::a::b}} and {{user}}"
    answer = await send(client, chat_id, text)
    body = await sent_body(client, answer["tour_id"])
    assert _last_user(body) == "keep {{nope}} and {{nope::a::b}} and User"


async def test_r2_3_original_in_card_inserts_connection_default(
    client: httpx.AsyncClient,
) -> None:
    card = {
        "spec": "chara_card_v2", "spec_version": "2.0",
        "data": {
            "name": "Orla", "description": "{{char}} keeps a lighthouse.", "personality": "",
            "scenario": "", "first_mes": "", "mes_example": "",
            "creator_notes": "", "tags": [], "creator": "", "character_version": "",
            "alternate_greetings": [], "extensions": {},
            "system_prompt": "Card rules first. {{original}} Card rules last. {{original}}",
            "post_history_instructions": "{{original}} Stay in character as {{char}}.",
        },
    }
    r = await client.post("/v1/characters", json=card)
    assert r.status_code == 201, r.text
    conn = await connection(client, params={
        "system_prompt": "Default prompt for {{char}} and {{user}}.",
        "post_history": "Default reminder.",
    })
    chat_id = await chat(client, conn, character_id=r.json()["id"])
    answer = await send(client, chat_id, "hi")
    body = await sent_body(client, answer["tour_id"])
    msgs = body["messages"]
    assert msgs[0] == {"role": "system", "content": "Card rules first. Default prompt for Orla "
                       "and User. Card rules last. "}
    assert msgs[-1] == {"role": "system", "content": "Default reminder. Stay in character as "
                        "Orla."}


FIELD_MACROS = ("[{{charPrompt}}][{{charInstruction}}][{{charDepthPrompt}}]"
                "[{{defaultSystemPrompt}}][{{mesExamples}}]")


async def test_card_and_preset_macros_are_filled_in_a_tour(client: httpx.AsyncClient) -> None:
    card = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {
        "name": "Eva", "description": FIELD_MACROS, "system_prompt": "Be {{char}}.",
        "post_history_instructions": "Stay short.", "mes_example": "<START>\n{{char}}: Hi.",
        "extensions": {"depth_prompt": {"prompt": "Eva hums.", "depth": 2}}}}
    r = await client.post("/v1/characters", json=card)
    assert r.status_code == 201, r.text
    conn = await connection(client, params={"system_prompt": "Default for {{char}}."})
    answer = await send(client, await chat(client, conn, character_id=r.json()["id"]), "hi")
    body = await sent_body(client, answer["tour_id"])
    assert body["messages"][1]["content"] == (
        "[Be Eva.][Stay short.][Eva hums.][Default for Eva.][<START>\nEva: Hi.\n]")


async def test_swipe_and_boundary_macros_are_filled_and_skip_the_message_swiped(
    client: httpx.AsyncClient,
) -> None:
    probe = ("last={{lastCharMessage}} id={{lastMessageId}} swipe={{currentSwipeId}}/"
             "{{lastSwipeId}} first={{firstIncludedMessageId}}")
    conn = await connection(client, params={"system_prompt": probe})
    chat_id = await chat(client, conn)
    await send(client, chat_id, "one")   # positions 0, 1
    await send(client, chat_id, "two")   # positions 2, 3
    answer = await send(client, chat_id, None, mode="swipe")
    main = (await sent_body(client, answer["tour_id"]))["messages"][0]["content"]
    # the answer to "two" is being swiped: the macros read the chat without it
    assert main == ("last=(mock) You said: one id=2 swipe=2/1 first=0")
    answer = await send(client, chat_id, "three")
    main = (await sent_body(client, answer["tour_id"]))["messages"][0]["content"]
    # the last message is now the new input (one variant)
    assert main == ("last=(mock) You said: two id=4 swipe=1/1 first=0")


async def test_instruct_macros_are_filled_on_a_text_mode_chatml_connection(
    client: httpx.AsyncClient, openai_text_fake: Any,
) -> None:
    conn = await connection(client, "openai-text", instruct="ChatML",
                            base_url=openai_text_fake.base_url, api_key="k", model="m")
    openai_text_fake.script.reply("ok")
    answer = await send(client, await chat(client, conn),
                        "[{{instructInput}}][{{instructOutput}}][{{instructStop}}]"
                        "[{{instructSystemPrefix}}]")
    prompt = (await sent_body(client, answer["tour_id"]))["prompt"]
    assert ("[<|im_start|>user][<|im_start|>assistant][<|im_end|>][<|im_start|>system]"
            in prompt)
    # a chat-mode connection has no instruct template: the macros are empty there
    answer = await send(client, await chat(client, await connection(client)),
                        "[{{instructInput}}]")
    assert _last_user(await sent_body(client, answer["tour_id"])) == "[]"
