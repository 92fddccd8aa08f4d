"""R8.1, R8.3: who may generate in a chat, and the `picture` flag a tour gets from the
message's images and its connection (checked in stage 1, where the chat is read)."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import make_user
from tests.fakes.upstream import FakeUpstream
from tests.generate.helpers import fake_connection, generate, messages, new_chat, tour_of

IMAGE = {"url": "data:image/png;base64,iVBORw0KGgo="}


async def test_r8_1_a_user_cannot_generate_in_someone_elses_chat(
    client: httpx.AsyncClient, openai_fake: FakeUpstream
) -> None:
    chat = await new_chat(client, await fake_connection(client, openai_fake))
    guest = {"Authorization": f"Bearer {await make_user(client, 'guest')}"}
    for stream in (True, False):
        r = await client.post(f"/v1/chats/{chat}/generate", headers=guest,
                              json={"message": {"content": "let me in"}, "stream": stream})
        assert r.status_code == 404, r.text
        assert r.json()["error"]["code"] == "not_found"
    assert await messages(client, chat) == []  # nothing was written for the stranger
    assert openai_fake.generation_requests == []
    missing = await client.post("/v1/chats/0123456789abcdef01234567/generate",
                                json={"message": {"content": "hello"}})
    assert missing.status_code == 404


async def test_r8_1_the_owner_generates_in_their_own_chat(
    client: httpx.AsyncClient, openai_fake: FakeUpstream
) -> None:
    token = await make_user(client, "guest")
    connection = await fake_connection(client, openai_fake)
    as_guest = {"Authorization": f"Bearer {token}"}
    r = await client.post("/v1/chats", headers=as_guest, json={"connection_id": connection})
    assert r.status_code == 201, r.text
    openai_fake.script.reply("Hello, guest.")
    answer = await client.post(f"/v1/chats/{r.json()['id']}/generate", headers=as_guest,
                               json={"message": {"content": "hi"}, "stream": False})
    assert answer.status_code == 200, answer.text
    assert answer.json()["content"] == "Hello, guest."


@pytest.mark.parametrize(("vision", "images", "override", "expected"), [
    (True, [IMAGE], None, True),
    (False, [IMAGE], None, False),
    (True, [], None, False),
    (True, [IMAGE], {"picture": False}, False),
    (False, [], {"picture": True}, True),
])
async def test_r8_3_picture_follows_the_images_and_the_connection(
    client: httpx.AsyncClient, openai_fake: FakeUpstream, vision: bool, images: list,
    override: dict | None, expected: bool,
) -> None:
    chat = await new_chat(client, await fake_connection(client, openai_fake, vision=vision))
    openai_fake.script.reply("Seen.")
    body: dict = {"message": {"content": "look", "images": images}, "stream": False}
    if override is not None:
        body["env"] = override  # the master may set flags for a tour
    r = await generate(client, chat, None, **body)
    assert r.status_code == 200, r.text
    tour = await tour_of(client, r.json()["tour_id"])
    assert tour["diagnostics"]["env"]["picture"] is expected


async def test_r2_15_a_tour_records_when_its_first_token_went_out(
    client: httpx.AsyncClient, openai_fake: FakeUpstream
) -> None:
    chat = await new_chat(client, await fake_connection(client, openai_fake))
    openai_fake.script.reply("One two three.")
    r = await generate(client, chat, "count", stream=False)
    diagnostics = (await tour_of(client, r.json()["tour_id"]))["diagnostics"]
    stages = sum(v for k, v in diagnostics["timings"].items()
                 if k not in ("streaming", "postprocess", "save"))
    assert stages <= diagnostics["first_token_ms"] < 30_000
