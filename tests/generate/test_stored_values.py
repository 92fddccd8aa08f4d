"""R8 "never a 500", R7 "nothing stored is lost": values stored before the door checked
them (or written around the API) never brick a chat. A chat setting or connection param
that does not fit its type is left out (its default applies) and named in the tour's
diagnostics under `ignored`; a stored image of a shape the API refuses is skipped."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import update

from evacore.core import Core
from evacore.store.tables import Chat, Connection, Message
from tests.fakes.upstream import FakeUpstream
from tests.generate.helpers import fake_connection, generate, new_chat, tour_of

BIG = 2**70
DEFAULT_MAIN = "Write Assistant's next reply in a fictional chat between Assistant and User."

pytestmark = pytest.mark.both_backends


async def _write(core: Core, table: Any, row_id: str, **values: Any) -> None:
    """Change a row around the API, as an older version (or a hand edit) could have."""
    async with core.session() as s:
        await s.execute(update(table).where(table.id == row_id).values(**values))


async def _answer(client: httpx.AsyncClient, chat: str, text: str = "Hello!") -> dict[str, Any]:
    r = await generate(client, chat, text, stream=False)
    assert r.status_code == 200, r.text
    return await tour_of(client, r.json()["tour_id"])


def _ignored(tour: dict[str, Any]) -> str:
    return "\n".join(tour["diagnostics"].get("ignored") or [])


async def test_r8_stored_authors_note_scenario_and_system_prompt_of_wrong_types_are_ignored(
    client: httpx.AsyncClient, core: Core, openai_fake: FakeUpstream
) -> None:
    chat = await new_chat(client, await fake_connection(client, openai_fake))
    await _write(core, Chat, chat, settings={
        "scenario": 123, "system_prompt": ["a"], "post_history": {"x": 1},
        "prompt_order": 5, "authors_note": {"text": "Rain falls.", "depth": "x", "role": 7},
        "client_state": {"n": BIG},  # read back as a float (db.py): harmless
    })
    for _ in range(2):  # the chat keeps working, tour after tour
        openai_fake.script.reply("Fine.")
        tour = await _answer(client, chat)
    messages = openai_fake.last_body["messages"]
    assert messages[0] == {"role": "system", "content": DEFAULT_MAIN}
    assert {"role": "system", "content": "Rain falls."} in messages  # the good part stays
    ignored = _ignored(tour)
    for key in ("settings.scenario", "settings.system_prompt", "settings.post_history",
                "settings.prompt_order", "authors_note.depth", "authors_note.role"):
        assert key in ignored, ignored
    stored = (await client.get(f"/v1/chats/{chat}")).json()["settings"]
    assert stored["scenario"] == 123, "reading never rewrites what is stored"


async def test_r8_stored_authors_note_that_is_not_an_object_is_ignored(
    client: httpx.AsyncClient, core: Core
) -> None:
    chat = await new_chat(client, None)  # the built-in mock connection
    for note in ("be nice", ["a"], 5):
        await _write(core, Chat, chat, settings={"authors_note": note})
        tour = await _answer(client, chat)
        assert tour["status"] == "completed"
        assert "chat settings.authors_note" in _ignored(tour)


async def test_r12_2_stored_bad_params_are_ignored_and_the_defaults_apply(
    client: httpx.AsyncClient, core: Core, openai_fake: FakeUpstream
) -> None:
    conn = await fake_connection(client, openai_fake, params={"retries": 0})
    chat = await new_chat(client, conn)
    await _write(core, Connection, conn, params={
        "timeouts": {"first_token": "abc", "idle": 5}, "retries": "many",
        "temperature": BIG, "top_p": 0.5, "max_tokens": -5, "extra_headers": {"X-A": 1},
        "my_backend": {"limit": BIG}, "stream_usage": "yes",
    })
    openai_fake.script.error(500, "one failure")  # retried: `retries` fell back to 2
    openai_fake.script.reply("Fine after all.")
    tour = await _answer(client, chat)
    assert tour["status"] == "completed"
    body = openai_fake.last_body
    assert body["top_p"] == 0.5 and "temperature" not in body and body["max_tokens"] == 128
    assert "x-a" not in {k.lower() for k in openai_fake.generation_requests[-1].headers}
    assert len(openai_fake.generation_requests) == 2
    ignored = _ignored(tour)
    for key in ("timeouts.first_token", "params.retries", "params.temperature",
                "params.max_tokens", "extra_headers.X-A", "params.stream_usage"):
        assert key in ignored, ignored


async def test_r8_3_stored_malformed_images_do_not_brick_the_chat(
    client: httpx.AsyncClient, core: Core, openai_fake: FakeUpstream
) -> None:
    """`[1]`, `[null]`, `[[1]]` and other shapes, as an older release stored them."""
    images: list[Any] = [1, None, [1], {"url": 5}, "not a url", {"detail": "low"}]
    chat = await new_chat(client, await fake_connection(client, openai_fake, vision=True))
    openai_fake.script.reply("Seen.")
    r = await generate(client, chat, "look", stream=False,
                       message={"content": "look",
                                "images": ["data:image/png;base64,iVBORw0KGgo="]})
    assert r.status_code == 200, r.text
    first = (await client.get(f"/v1/chats/{chat}/messages")).json()["messages"][0]["id"]
    await _write(core, Message, first, images=images + ["https://example.org/kept.png"])
    for _ in range(2):
        openai_fake.script.reply("Still here.")
        tour = await _answer(client, chat, "and now?")
        assert tour["status"] == "completed"
    look = next(m for m in openai_fake.last_body["messages"] if m["role"] == "user")
    assert look["content"] == [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": "https://example.org/kept.png"}},
    ]


async def test_r2_9_a_stored_instruct_name_that_is_not_a_string_is_ignored(
    client: httpx.AsyncClient, core: Core, openai_text_fake: FakeUpstream
) -> None:
    conn = await fake_connection(client, openai_text_fake, params={"retries": 0})
    chat = await new_chat(client, conn)
    await _write(core, Connection, conn, instruct={"preset": 5, "context": ["x"]})
    openai_text_fake.script.reply("Fine.")
    tour = await _answer(client, chat)
    assert tour["status"] == "completed"
    assert "<|im_start|>" in openai_text_fake.last_body["prompt"]  # the model's guess: ChatML
