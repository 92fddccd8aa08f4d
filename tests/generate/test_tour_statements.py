"""A tour's database work: the statements of a normal tour, counted (R2.1 stage 1, R2.14).

What is asserted is the shape, not a speed: the chat's row is written once when the user's
message goes in and once at the save (position, turn, variables and state together), the
tour's record once at each end, and nothing is read back at the save that the tour knew.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
from sqlalchemy import event

from evacore.core import Core
from tests.generate.helpers import messages, mock_chat, variant


@contextmanager
def statements(core: Core) -> Iterator[list[str]]:
    """The statements run meanwhile, but the abort poll's: it runs by the clock (twice a
    second while a tour runs), and a slow machine gives a tour time for one."""
    seen: list[str] = []

    def note(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        text = " ".join(statement.split())
        if not (text.upper().startswith("SELECT TOURS.ID") and "ABORT_REQUESTED" in text.upper()):
            seen.append(text)

    engine = core.engine.sync_engine
    event.listen(engine, "before_cursor_execute", note)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", note)


def _count(seen: list[str], prefix: str) -> int:
    return sum(1 for s in seen if s.upper().startswith(prefix))


async def _say(client: httpx.AsyncClient, chat: str, text: str) -> dict[str, Any]:
    r = await client.post(f"/v1/chats/{chat}/generate",
                          json={"message": {"content": text}, "stream": False})
    assert r.status_code == 200, r.text
    return r.json()


async def test_r2_14_a_normal_tour_writes_each_row_once(
    client: httpx.AsyncClient, core: Core
) -> None:
    chat = await mock_chat(client, [{"text": "Fine, thanks."}])
    await _say(client, chat, "Warm up the caches.")
    with statements(core) as seen:
        await _say(client, chat, "How are you?")
    assert _count(seen, "UPDATE CHATS") == 2, seen  # the user's position; the save
    assert _count(seen, "INSERT INTO TOURS") == 1, seen
    assert _count(seen, "UPDATE TOURS") == 1, seen
    assert _count(seen, "INSERT INTO MESSAGES") == 2, seen
    assert _count(seen, "INSERT INTO VARIANTS") == 1, seen
    assert not [s for s in seen if s.upper().startswith("SELECT TOURS.ID")], seen
    assert len(seen) <= 13, seen
    stored = await messages(client, chat)
    assert [m["role"] for m in stored] == ["user", "assistant"] * 2
    assert variant(stored[-1])["content"] == "Fine, thanks."
    assert [m["position"] for m in stored] == [0, 1, 2, 3]
    assert (await client.get(f"/v1/chats/{chat}")).json()["turn"] == 2


async def test_r2_14_a_regenerated_answer_is_a_new_active_variant_of_the_same_message(
    client: httpx.AsyncClient, core: Core
) -> None:
    chat = await mock_chat(client, [{"text": "Again."}])
    first = await _say(client, chat, "Say something.")
    with statements(core) as seen:
        r = await client.post(f"/v1/chats/{chat}/generate",
                              json={"mode": "regenerate", "stream": False})
    assert r.status_code == 200, r.text
    assert _count(seen, "INSERT INTO MESSAGES") == 0, seen
    assert _count(seen, "UPDATE MESSAGES") == 1, seen
    stored = await messages(client, chat)
    assert len(stored) == 2 and stored[-1]["id"] == first["message_id"]
    assert len(stored[-1]["variants"]) == 2
    assert stored[-1]["active_variant"] == r.json()["variant_id"]
    assert (await client.get(f"/v1/chats/{chat}")).json()["turn"] == 2
