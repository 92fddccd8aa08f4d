"""R2.14 and §0: whatever happens during a save, the tour ends with a status and the answer
is kept as what it is. A stopped or failed answer stays in the chat but never comes back in
a later prompt as a finished one (an edit makes it whole again); a held answer that was
never judged is not stored as speech; a failing extra record or a NUL from the model does
not lose the answer; a tour is never left `running`."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from evacore.core import Core
from evacore.pipeline.request import TourRequest
from tests.generate.helpers import messages, mock_chat, parse_sse, variant


async def _abort_after(core: Core, chat: str, text: str, event: str) -> str:
    """Start a tour through the core's door; abort it once `event` came; its id."""
    running = core.tours.start(TourRequest(chat_id=chat, user_id=None, role="master",
                                           text=text))
    async for name, _ in running.events():
        if name == event:
            await asyncio.sleep(0.3)  # the model streams on meanwhile
            running.abort("stop button")
            break
    await running.result()
    return running.id


async def _last_prompt(client: httpx.AsyncClient, tour_id: str) -> list[dict[str, Any]]:
    tour = (await client.get(f"/v1/tours/{tour_id}")).json()
    return tour["diagnostics"]["requests"][0]["body"]["messages"]


async def test_r2_14_a_stopped_answer_stays_but_is_not_replayed_until_edited(
    client: httpx.AsyncClient, core: Core
) -> None:
    chat = await mock_chat(client, [
        {"match": "long", "text": "Once upon a time in a kingdom far away " * 20,
         "token_delay": 0.05},
        {"text": "Short answer."}])
    await _abort_after(core, chat, "tell me a long story", "delta")
    stored = await messages(client, chat)
    assert [m["role"] for m in stored] == ["user", "assistant"]
    stopped = variant(stored[1])
    assert stopped["status"] == "aborted" and stopped["content"].startswith("Once"), stopped
    r = await client.post(f"/v1/chats/{chat}/generate",
                          json={"message": {"content": "and now?"}, "stream": False})
    assert r.status_code == 200
    sent = await _last_prompt(client, r.json()["tour_id"])
    assert not any("Once upon" in str(m.get("content")) for m in sent), sent
    # an edit makes the stopped answer the person's own, whole: it is sent from then on
    r = await client.patch(f"/v1/chats/{chat}/messages/{stored[1]['id']}",
                           json={"content": "Once upon a time, the end."})
    assert r.status_code == 200 and variant(r.json())["status"] == "complete"
    r = await client.post(f"/v1/chats/{chat}/generate",
                          json={"message": {"content": "again"}, "stream": False})
    sent = await _last_prompt(client, r.json()["tour_id"])
    assert any(m.get("content") == "Once upon a time, the end." for m in sent), sent


async def test_r2_14_a_held_answer_stopped_before_judgement_is_not_stored(
    client: httpx.AsyncClient, core: Core
) -> None:
    r = await client.post("/v1/rules", json={"name": "no_shouting", "scope": "text",
                                             "condition": "SHOUT", "text": "Speak softly."})
    assert r.status_code == 201
    chat = await mock_chat(client, [{"text": "I SHOUT " + "and shout more " * 40,
                                 "token_delay": 0.05}])
    tour_id = await _abort_after(core, chat, "hi", "hold")
    tour = (await client.get(f"/v1/tours/{tour_id}")).json()
    assert tour["status"] == "aborted"
    assert tour["diagnostics"].get("unjudged_dropped", 0) > 0
    stored = await messages(client, chat)
    assert [m["role"] for m in stored] == ["user"], stored  # no unjudged speech


async def test_r2_14_a_failing_extra_record_keeps_the_answer_and_ends_the_tour(
    client: httpx.AsyncClient, core: Core
) -> None:
    async def broken(session: Any, tour: Any) -> None:
        raise RuntimeError("the firings table is gone")

    core.save_hooks.append(broken)
    chat = await mock_chat(client, [{"text": "A whole answer."}])
    r = await client.post(f"/v1/chats/{chat}/generate",
                          json={"message": {"content": "hi"}, "stream": False})
    assert r.status_code == 200, r.text
    tour = (await client.get(f"/v1/tours/{r.json()['tour_id']}")).json()
    assert tour["status"] == "completed" and "save_problem" in tour["diagnostics"]
    stored = await messages(client, chat)
    assert variant(stored[-1])["content"] == "A whole answer."
    assert (await client.get(f"/v1/chats/{chat}")).json()["turn"] == 1


async def test_r2_14_a_save_that_cannot_store_the_answer_still_ends_the_tour(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evacore.pipeline.stages import save

    async def refuse(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("disk full")

    monkeypatch.setattr(save, "_store_answer", refuse)
    chat = await mock_chat(client, [{"text": "Lost words."}])
    r = await client.post(f"/v1/chats/{chat}/generate",
                          json={"message": {"content": "hi"}})
    assert r.status_code == 200
    events = parse_sse(r.text)
    assert events[-1][0] == "error"
    tour_id = events[0][1]["tour_id"]
    tour = (await client.get(f"/v1/tours/{tour_id}")).json()
    assert tour["status"] == "failed", tour["status"]
    assert [m["role"] for m in await messages(client, chat)] == ["user"]  # it was kept


async def test_r2_14_a_nul_from_the_model_is_stored_as_a_replacement_character(
    client: httpx.AsyncClient
) -> None:
    chat = await mock_chat(client, [{"text": "before\u0000after"}])
    r = await client.post(f"/v1/chats/{chat}/generate",
                          json={"message": {"content": "hi"}, "stream": False})
    assert r.status_code == 200, r.text
    tour = (await client.get(f"/v1/tours/{r.json()['tour_id']}")).json()
    assert tour["status"] == "completed"
    stored = await messages(client, chat)
    assert variant(stored[-1])["content"] == "before\ufffdafter"
