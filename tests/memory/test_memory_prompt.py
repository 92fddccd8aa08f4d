"""R2.5 through real tours: memory blocks are in every prompt of their chat at their
position; retrieval brings back a fact from early in a long chat, after the history, with
diagnostics; messages still in the window are not retrieved; answers are indexed on save."""

from __future__ import annotations

import httpx

from evacore.core import Core
from evacore.store.tables import Character
from tests.memory.corpus import long_chat
from tests.memory.helpers import add_messages, say, scripted_chat, sent_messages

FACT = "By the way, my sister's cat is called Pumpernickel."


async def _character(core: Core) -> str:
    async with core.session() as s:
        ch = Character(name="Mira", data={"name": "Mira", "description": "Mira is a librarian.",
                                          "scenario": "SCENARIO-MARK: a rainy evening."})
        s.add(ch)
        await s.flush()
        return ch.id


def _index_of(messages: list[dict], needle: str) -> int:
    hits = [i for i, m in enumerate(messages) if needle in str(m["content"])]
    assert len(hits) == 1, (needle, hits)
    return hits[0]


async def test_r2_5_blocks_are_in_every_prompt_after_the_card(
    client: httpx.AsyncClient, core: Core
) -> None:
    char_id = await _character(core)
    chat_id = await scripted_chat(client, [{"text": "ok"}], character_id=char_id)
    other = await scripted_chat(client, [{"text": "ok"}])
    me = (await client.get("/v1/me")).json()["id"]
    for scope, label, extra in (
        ({"chat_id": chat_id}, "chat-notes", {"mandatory": True}),
        ({"character_id": char_id}, "mira-notes", {"read_only": True}),
        ({"user_id": me}, "user-notes", {}),
        ({"chat_id": other}, "other-notes", {}),
    ):
        r = await client.post("/v1/memory", json={**scope, "label": label,
                                                  "content": f"BLOCK-{label}", **extra})
        assert r.status_code == 201, r.text
    for turn in ("hello", "and again"):
        body = await say(client, chat_id, turn)
        sent = sent_messages(body)
        card = _index_of(sent, "SCENARIO-MARK")
        user, mira, own = (_index_of(sent, f"BLOCK-{x}-notes") for x in ("user", "mira", "chat"))
        first_chat = _index_of(sent, turn)
        assert card < user < mira < own < first_chat
        assert '<memory label="mira-notes" chars="16/2000" read_only="true">' in sent[mira]["content"]
        assert all("BLOCK-other" not in str(m["content"]) for m in sent)
        blocks = body["diagnostics"]["memory"]["blocks"]
        assert [b["label"] for b in blocks] == ["user-notes", "mira-notes", "chat-notes"]
        added = next(c for c in body["diagnostics"]["changes"]
                     if c["stage"] == "memory")["added"]
        assert [a.split(":")[0] for a in added] == ["memory"] * 3


async def test_r2_5_early_fact_comes_back_into_the_prompt(
    client: httpx.AsyncClient, core: Core
) -> None:
    chat_id = await scripted_chat(
        client, [{"if_prompt_contains": "Pumpernickel", "text": "It is Pumpernickel!"}],
        context_size=2048, max_tokens=256,
    )
    turns, _ = long_chat(300, facts=[(FACT, "")])
    ids = await add_messages(core, chat_id, turns)
    fact_id = ids[turns.index(("user", FACT))]
    assert turns.index(("user", FACT)) < 150

    body = await say(client, chat_id, "Hey, what was the name of my sister's cat again?")
    assert body["content"] == "It is Pumpernickel!"
    report = body["diagnostics"]["memory"]["retrieval"]
    assert report["backfilled"] >= 300
    assert report["inserted"][0]["source"] == f"message:{fact_id}"
    assert report["query"].endswith("what was the name of my sister's cat again?")
    assert any(c["source"] == f"message:{fact_id}" for c in report["candidates"])
    sent = sent_messages(body)
    at = _index_of(sent, "Pumpernickel")
    assert sent[at]["content"] == f"[Earlier in this chat, User wrote: {FACT}]"
    # after the history, right before the final input; never in the system area on top
    assert at == len(sent) - 2 and "sister's cat again" in sent[-1]["content"]
    assert any(m["role"] in ("user", "assistant") for m in sent[:at])
    kept_history = [c for c in body["diagnostics"]["changes"] if c["stage"] == "context_shift"]
    assert not any(r["id"] == f"history:{fact_id}" for c in kept_history
                   for r in c.get("removed", []))  # it was never loaded: it came back by search


async def test_r2_5_messages_in_the_window_are_not_retrieved(
    client: httpx.AsyncClient, core: Core
) -> None:
    chat_id = await scripted_chat(client, [{"text": "ok"}])
    await add_messages(core, chat_id, [("user", FACT), ("assistant", "What a lovely name.")])
    body = await say(client, chat_id, "What is my sister's cat called?")
    report = body["diagnostics"]["memory"]["retrieval"]
    assert report["inserted"] == []
    assert report["excluded_in_window"] >= 1
    assert sum(FACT in str(m["content"]) for m in sent_messages(body)) == 1


async def test_r2_5_new_messages_are_indexed_as_they_are_saved(
    client: httpx.AsyncClient,
) -> None:
    chat_id = await scripted_chat(
        client, [{"text": "Noted: the treasure is buried beneath the lighthouse."}],
        settings={"retrieval": {"enabled": False}},
    )
    body = await say(client, chat_id, "Where should we hide the zeppelin tickets?")
    assert body["diagnostics"]["memory"]["retrieval"] == {"enabled": False}
    for query, expected in (("zeppelin tickets", "zeppelin"), ("buried treasure", "lighthouse")):
        r = await client.post("/v1/memory/search", json={"chat_id": chat_id, "query": query})
        assert r.status_code == 200, r.text
        assert expected in r.json()["results"][0]["text"]


async def test_r2_5_an_edited_message_is_not_retrieved_with_its_old_text(
    client: httpx.AsyncClient, core: Core
) -> None:
    chat_id = await scripted_chat(client, [{"text": "ok"}])
    [first, _] = await add_messages(core, chat_id, [("user", "My lucky number is seventeen."),
                                                    ("assistant", "Nice.")])
    search = {"chat_id": chat_id, "query": "lucky number seventeen"}
    await say(client, chat_id, "hello")  # indexes the chat
    assert (await client.post("/v1/memory/search", json=search)).json()["results"]
    r = await client.patch(f"/v1/chats/{chat_id}/messages/{first}",
                           json={"content": "My lucky number is forty-two."})
    assert r.status_code == 200, r.text
    hits = (await client.post("/v1/memory/search", json=search)).json()["results"]
    assert all("seventeen" not in h["text"] for h in hits)
    again = (await client.post("/v1/memory/search", json={**search, "query": "lucky forty-two"})
             ).json()["results"]
    assert "forty-two" in again[0]["text"]


async def test_r2_5_retrieval_keeps_to_top_k_and_its_token_budget(
    client: httpx.AsyncClient, core: Core
) -> None:
    facts = [f"The submarine {name} is painted in stripes of {colour}." for name, colour in (
        ("Nautilus", "teal"), ("Kraken", "amber"), ("Triton", "violet"), ("Leviathan", "gold"))]
    chat_id = await scripted_chat(client, [{"text": "ok"}], context_size=1024, max_tokens=128,
                                  settings={"retrieval": {"top_k": 2, "min_score": 0.05}})
    filler = [("user", "Nothing much today."), ("assistant", "Alright.")] * 150
    await add_messages(core, chat_id, [("user", f) for f in facts] + filler)
    body = await say(client, chat_id, "Which submarine is painted in stripes?")
    report = body["diagnostics"]["memory"]["retrieval"]
    assert len(report["inserted"]) == 2
    assert {c["reason"] for c in report["cut"]} >= {"top_k"}
    assert sum("submarine" in str(m["content"]) for m in sent_messages(body)) == 3

    r = await client.patch(f"/v1/chats/{chat_id}", json={"settings": {"retrieval": {
        "top_k": 4, "min_score": 0.05, "max_tokens": 40}}})
    assert r.status_code == 200, r.text
    body = await say(client, chat_id, "Which submarine is painted in stripes?")
    report = body["diagnostics"]["memory"]["retrieval"]
    assert report["budget"] == 40
    assert sum(i["tokens"] for i in report["inserted"]) <= 40
    assert len(report["inserted"]) == 1
    assert any(c["reason"] == "budget" for c in report["cut"])
