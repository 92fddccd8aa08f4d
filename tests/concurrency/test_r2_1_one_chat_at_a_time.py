"""R2.1 stage 1 and §0 under concurrency: tours of one chat run one after another, on SQLite
and PostgreSQL alike. Six generates fired at one chat at once all answer 2xx; each user
message is stored exactly once and followed by its own answer; `turn` counts every answer."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from tests.generate.helpers import messages, mock_chat, parse_sse, shown


def _pairs(stored: list[dict[str, Any]]) -> list[tuple[str, str]]:
    roles = [m["role"] for m in stored]
    assert roles == ["user", "assistant"] * (len(stored) // 2), roles
    return [(shown(stored[i]), shown(stored[i + 1])) for i in range(0, len(stored), 2)]


@pytest.mark.parametrize("stream", [True, False])
async def test_r2_1_six_generates_at_once_each_stored_once_with_its_answer(
    client: httpx.AsyncClient, stream: bool
) -> None:
    chat = await mock_chat(client, [{"delay": 0.05, "token_delay": 0.01}])
    said = [f"message number {i}" for i in range(6)]
    answers = await asyncio.gather(*(
        client.post(f"/v1/chats/{chat}/generate",
                    json={"message": {"content": text}, "stream": stream})
        for text in said))
    assert [r.status_code for r in answers] == [200] * 6, [r.text for r in answers]
    if stream:
        for r in answers:
            names = [n for n, _ in parse_sse(r.text)]
            assert names[-1] == "done", names
    pairs = _pairs(await messages(client, chat))
    assert sorted(user for user, _ in pairs) == sorted(said)  # each stored exactly once
    for user, answer in pairs:  # and answered right after itself, from a prompt ending in it
        assert answer == f"(mock) You said: {user}", (user, answer)
    r = await client.get(f"/v1/chats/{chat}")
    assert r.json()["turn"] == 6
    tours = (await client.get("/v1/stats")).json()["tours"]
    assert tours.get("completed") == 6 and not tours.get("running"), tours


async def test_r2_1_regenerates_and_turns_mixed_keep_the_chat_consistent(
    client: httpx.AsyncClient
) -> None:
    chat = await mock_chat(client, [{"delay": 0.03}])
    r = await client.post(f"/v1/chats/{chat}/generate",
                          json={"message": {"content": "first"}, "stream": False})
    assert r.status_code == 200, r.text
    bodies = [{"mode": "regenerate"}, {"message": {"content": "second"}}, {"mode": "swipe"},
              {"message": {"content": "third"}}, {"mode": "continue"}]
    answers = await asyncio.gather(*(
        client.post(f"/v1/chats/{chat}/generate", json={**b, "stream": False})
        for b in bodies))
    assert all(r.status_code in (200, 422) for r in answers), [r.text for r in answers]
    stored = await messages(client, chat)
    users = [shown(m) for m in stored if m["role"] == "user"]
    assert sorted(users) == ["first", "second", "third"]
    roles = [m["role"] for m in stored]
    assert roles == ["user", "assistant"] * 3, roles


async def test_r2_1_an_aborted_waiting_tour_stores_nothing(client: httpx.AsyncClient) -> None:
    chat = await mock_chat(client, [{"match": "slow", "delay": 1.0}, {"delay": 0}])
    first = asyncio.ensure_future(client.post(
        f"/v1/chats/{chat}/generate", json={"message": {"content": "slow one"},
                                            "stream": False}))
    await asyncio.sleep(0.2)
    waiting = asyncio.ensure_future(client.post(
        f"/v1/chats/{chat}/generate", json={"message": {"content": "never stored"},
                                            "stream": False}))
    await asyncio.sleep(0.2)
    waiting.cancel()  # the client gives up while its tour waits for the chat
    r = await first
    assert r.status_code == 200, r.text
    await asyncio.sleep(0.3)
    texts = [shown(m) for m in await messages(client, chat)]
    assert "never stored" not in texts and texts[0] == "slow one"


async def test_r2_15_a_tour_behind_its_chats_earlier_one_says_how_long_it_waited(
    client: httpx.AsyncClient
) -> None:
    chat = await mock_chat(client, [{"match": "slow", "delay": 0.4}, {"delay": 0}])
    first = asyncio.ensure_future(client.post(
        f"/v1/chats/{chat}/generate", json={"message": {"content": "slow one"},
                                            "stream": False}))
    await asyncio.sleep(0.1)
    second = await client.post(f"/v1/chats/{chat}/generate",
                               json={"message": {"content": "quick one"}, "stream": False})
    early = await first
    assert early.status_code == second.status_code == 200, (early.text, second.text)

    async def diagnostics(answer: httpx.Response) -> dict[str, Any]:
        r = await client.get(f"/v1/tours/{answer.json()['tour_id']}")
        return dict(r.json()["diagnostics"])

    behind, alone = await diagnostics(second), await diagnostics(early)
    assert behind["turn_wait_ms"] >= 150, behind.get("turn_wait_ms")  # the slow tour's rest
    assert behind["waited_ms"] >= behind["turn_wait_ms"]
    assert "turn_wait_ms" not in alone
