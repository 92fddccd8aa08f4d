"""R2.4, §13: lorebook entries reach the prompt of real tours (stage 4) — sources, budget and
`mandatory`, timed effects kept per chat, settings, positions, outlets."""

from __future__ import annotations

import httpx
from sqlalchemy import update

from evacore.core import Core
from evacore.store.tables import LoreEntry
from tests.lore_integration._util import (
    ELDORIA,
    SAKANA,
    activated,
    cut_reasons,
    index_of,
    make_book,
    make_chat,
    quiet_connection,
    sent,
    tour,
    wi_entry,
)


async def test_r2_4_imported_world_info_activates_on_its_keys(client: httpx.AsyncClient) -> None:
    r = await client.post("/v1/lorebooks/import", files={"file": ("st_Eldoria.json",
                                                                  ELDORIA.read_bytes())})
    book_id = r.json()["id"]
    chat = await make_chat(client, connection_id=await quiet_connection(client),
                           lorebook_ids=[book_id])
    diag = await tour(client, chat, "Tell me about the Shadowfang beasts.")
    assert activated(diag) == {1}
    shadowfang = "The Shadowfangs are beasts of darkness"
    messages = sent(diag)
    assert index_of(messages, shadowfang) < index_of(messages, "helpful, honest"), \
        "a before_char entry sits before the character description"
    assert f"lore:{book_id}:1" in diag["lore"]["placed"][0]["id"]
    assert diag["lore"]["books_loaded"] == 1

    diag = await tour(client, chat, "What a nice day.")
    assert activated(diag) == set() and diag["lore"]["books_loaded"] == 0, "the book is cached"
    assert all(shadowfang not in str(m["content"]) for m in sent(diag))

    r = await client.patch(f"/v1/lorebooks/{book_id}/entries/2", json={"key": ["day"]})
    assert r.status_code == 200
    diag = await tour(client, chat, "What a nice day.")
    assert activated(diag) == {2} and diag["lore"]["books_loaded"] == 1, "an edit reloads it"


async def test_r2_4_a_card_book_activates_for_its_character(client: httpx.AsyncClient) -> None:
    r = await client.post("/v1/characters", files={"file": (SAKANA.name, SAKANA.read_bytes())})
    assert r.status_code == 201, r.text
    character = r.json()
    assert character["lorebook_id"]
    chat = await make_chat(client, connection_id=await quiet_connection(client),
                           character_id=character["id"])
    diag = await tour(client, chat, "Money?")
    assert 8 in activated(diag)
    assert diag["lore"]["books"][0]["source"] == "character"
    messages = sent(diag)
    entry = index_of(messages, "Um so...")
    assert entry > index_of(messages, "Sakana"), "an after_char entry follows the card"


async def test_r2_4_mandatory_entry_survives_a_budget_that_cuts_a_constant_one(
    client: httpx.AsyncClient,
) -> None:
    book = await make_book(client, [
        wi_entry(0, [], "Always-on lore about the valley. " * 10, constant=True, order=300),
        wi_entry(1, ["dragon"], "The dragon is named Ember.", ignoreBudget=True, order=100),
        wi_entry(2, ["dragon"], "Dragons hoard gold.", order=50),
    ])
    chat = await make_chat(client, connection_id=await quiet_connection(client),
                           lorebook_ids=[book], settings={"world_info": {"budget_cap": 20}})
    diag = await tour(client, chat, "A dragon flies over us.")
    assert activated(diag) == {1}
    assert cut_reasons(diag) == {0: "budget", 2: "budget"}
    messages = sent(diag)
    index_of(messages, "The dragon is named Ember.")
    assert all("valley" not in str(m["content"]) for m in messages)
    placed = diag["lore"]["placed"]
    assert [(p["id"], p["mandatory"]) for p in placed] == [(f"lore:{book}:1", True)]


async def test_r2_4_sticky_and_cooldown_are_kept_per_chat_across_tours(
    client: httpx.AsyncClient,
) -> None:
    book = await make_book(client, [wi_entry(0, ["storm"], "A storm rages.", sticky=3, cooldown=2)])
    conn = await quiet_connection(client)
    chat = await make_chat(client, connection_id=conn, lorebook_ids=[book],
                           settings={"world_info": {"depth": 1}})
    other = await make_chat(client, connection_id=conn, lorebook_ids=[book],
                            settings={"world_info": {"depth": 1}})
    first = await tour(client, chat, "A storm comes.")
    assert activated(first) == {0}
    second = await tour(client, chat, "Calm words.")
    assert activated(second) == {0}
    assert any("sticky" in r for r in second["lore"]["activated"][0]["reasons"])
    assert activated(await tour(client, other, "Calm words.")) == set(), "state is per chat"
    third = await tour(client, chat, "Another storm!")
    assert activated(third) == set() and cut_reasons(third) == {0: "cooldown"}
    fourth = await tour(client, chat, "The storm returns.")
    assert activated(fourth) == {0}, "the cooldown ended"


async def test_r13_scan_depth_follows_global_settings_and_the_chat_override(
    client: httpx.AsyncClient,
) -> None:
    book = await make_book(client, [wi_entry(0, ["lantern"], "The lantern is cursed.")])
    chat = await make_chat(client, connection_id=await quiet_connection(client),
                           lorebook_ids=[book])
    diag = await tour(client, chat, "I light the lantern.")
    assert activated(diag) == {0} and diag["lore"]["scan_depth"] == 2

    r = await client.patch("/v1/settings", json={"world_info": {"world_info_depth": 3}})
    assert r.status_code == 200
    diag = await tour(client, chat, "We walk on.")
    assert diag["lore"]["scan_depth"] == 3
    assert activated(diag) == {0}, "three messages back reach the lantern (two would not)"

    r = await client.patch(f"/v1/chats/{chat}", json={"settings": {"world_info": {"depth": 1}}})
    assert r.status_code == 200
    diag = await tour(client, chat, "We walk further.")
    assert diag["lore"]["scan_depth"] == 1 and activated(diag) == set()


async def test_r2_4_positions_at_depth_authors_note_and_examples(client: httpx.AsyncClient) -> None:
    book = await make_book(client, [
        wi_entry(0, [], "DEPTH-ONE-ASSISTANT", constant=True, position=4, depth=1, role=2),
        wi_entry(1, [], "DEPTH-ZERO-SYSTEM", constant=True, position=4, depth=0, role=0),
        wi_entry(2, [], "AFTER-CHAR", constant=True, position=1),
        wi_entry(3, [], "AN-TOP", constant=True, position=2),
        wi_entry(4, [], "AN-BOTTOM", constant=True, position=3),
        wi_entry(5, [], "EXAMPLE-TOP", constant=True, position=5),
    ])
    chat = await make_chat(client, connection_id=await quiet_connection(client),
                           lorebook_ids=[book], settings={"authors_note": {
                               "text": "THE-NOTE", "depth": 2, "role": "user"}})
    await tour(client, chat, "first")
    messages = sent(await tour(client, chat, "second"))
    contents = [m["content"] for m in messages]
    assert contents[-1] == "DEPTH-ZERO-SYSTEM" and messages[-1]["role"] == "system"
    assert contents[-2] == "second"
    assert contents[-3] == "DEPTH-ONE-ASSISTANT" and messages[-3]["role"] == "assistant"
    # the note's top and bottom entries are sent with it, as one message
    note = contents.index("AN-TOP\nTHE-NOTE\nAN-BOTTOM")
    assert messages[note]["role"] == "user"
    first = contents.index("first")
    assert contents.index("AFTER-CHAR") < contents.index("EXAMPLE-TOP") < first


async def test_r2_4_outlets_reach_the_authors_note_and_post_history(
    client: httpx.AsyncClient,
) -> None:
    book = await make_book(client, [
        wi_entry(0, ["rain"], "It is raining.", position=7, outletName="weather"),
    ])
    chat = await make_chat(client, connection_id=await quiet_connection(client),
                           lorebook_ids=[book], settings={
                               "authors_note": {"text": "Weather: {{outlet::weather}}", "depth": 1},
                               "post_history": "Remember the weather: {{outlet::weather}}"})
    diag = await tour(client, chat, "Is there rain today?")
    contents = [m["content"] for m in sent(diag)]
    assert "Weather: It is raining." in contents
    assert "Remember the weather: It is raining." in contents
    assert all(c != "It is raining." for c in contents), "an outlet is only shown through its macro"
    assert diag["lore"]["outlets"] == ["weather"]
    contents = [m["content"] for m in sent(await tour(client, chat, "Sunny."))]
    assert "Weather:" in contents, "no activation, an empty outlet (the injection trimmed)"


async def test_r2_4_a_malformed_stored_entry_does_not_fail_the_tour(
    client: httpx.AsyncClient, core: Core,
) -> None:
    book = await make_book(client, [wi_entry(0, ["owl"], "Owls watch."),
                                    wi_entry(1, ["owl"], "Broken.")])
    async with core.session() as s:
        await s.execute(update(LoreEntry).where(LoreEntry.lorebook_id == book, LoreEntry.uid == 1)
                        .values(data={"key": {"not": "a list"}, "content": "Broken."}))
    chat = await make_chat(client, lorebook_ids=[book])
    r = await client.post(f"/v1/chats/{chat}/generate",
                          json={"message": {"content": "An owl hoots."}, "stream": False})
    assert r.status_code == 200, r.text
    diag = (await client.get(f"/v1/tours/{r.json()['tour_id']}")).json()["diagnostics"]
    assert activated(diag) == {0}
    assert [(p["book"], p["uid"]) for p in diag["lore"]["problems"]] == [(book, 1)]
