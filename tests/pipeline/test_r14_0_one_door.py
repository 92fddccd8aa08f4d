"""R14.0: every channel starts its tours through one door of the core. A tiny channel written
here (a request in, events out, as Telegram or a terminal would) gets exactly what the HTTP
generate route gets: the same upstream request, the same events, the same stored chat. And
`PATCH /v1/settings {"default_connection_id"}` picks the connection new chats get."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from evacore.core import Core
from evacore.errors import InvalidInput
from evacore.pipeline.request import TourRequest
from tests.conftest import make_user
from tests.fakes.upstream import FakeUpstream
from tests.generate.helpers import fake_connection, messages, new_chat, stream, variant


class LineChannel:
    """A channel in a dozen lines: text in, the answer's text and every event out."""

    def __init__(self, core: Core, user_id: str, role: str = "master") -> None:
        self.core, self.user_id, self.role = core, user_id, role

    async def say(self, chat_id: str, text: str, **fields: Any) -> tuple[str, list[Any]]:
        running = self.core.tours.start(TourRequest(
            chat_id=chat_id, user_id=self.user_id, role=self.role, text=text, **fields))
        events = [event async for event in running.events()]
        tour = await running.result()
        return tour.answer, events


def _shape(events: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """Events without the ids and timings that differ between two tours."""
    out = []
    for name, data in events:
        if name == "delta":
            out.append((name, data["text"]))
        elif name == "message":
            out.append((name, data["content"]))
        elif name == "tool_call":
            out.append((name, (data["name"], data["arguments"])))
        elif name == "tool_result":
            out.append((name, data["content"]))
        else:
            out.append((name, None))
    return out


def _stored(msgs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(m["role"], m["content"],
             [s["text"] for s in variant(m)["steps"]] if m["active_variant"] else [])
            for m in msgs]


async def _master_id(client: httpx.AsyncClient) -> str:
    return (await client.get("/v1/me")).json()["id"]


async def test_r14_0_a_second_channel_stores_and_streams_what_http_generate_does(
    client: httpx.AsyncClient, core: Core, openai_fake: FakeUpstream
) -> None:
    conn = await fake_connection(client, openai_fake)
    core.settings.workspace_dir.mkdir(parents=True, exist_ok=True)
    (core.settings.workspace_dir / "notes.md").write_text("milk, eggs", encoding="utf-8")
    by_http, by_channel = await new_chat(client, conn), await new_chat(client, conn)

    def script() -> None:
        openai_fake.script.tool_call("read_file", {"path": "notes.md"}, id="call_1",
                                     text="Let me look.").reply("You need milk and eggs.")

    script()
    http_events = await stream(client, by_http, "What is on my list?")
    http_upstream = [b["messages"] for b in openai_fake.bodies()[-2:]]

    script()
    channel = LineChannel(core, await _master_id(client))
    answer, channel_events = await channel.say(by_channel, "What is on my list?")
    channel_upstream = [b["messages"] for b in openai_fake.bodies()[-2:]]

    assert answer == "You need milk and eggs."
    assert _shape(channel_events) == _shape(http_events)
    assert ("tool_result", "milk, eggs") in _shape(channel_events)
    assert channel_upstream == http_upstream
    assert _stored(await messages(client, by_channel)) == _stored(await messages(client, by_http))
    assert _stored(await messages(client, by_channel))[0][:2] == ("user", "What is on my list?")
    chats = {c["id"]: c for c in (await client.get("/v1/chats")).json()["chats"]}
    assert chats[by_channel]["turn"] == chats[by_http]["turn"] == 1


async def test_r14_0_the_door_refuses_what_generate_refuses(
    client: httpx.AsyncClient, core: Core, openai_fake: FakeUpstream
) -> None:
    chat = await new_chat(client, await fake_connection(client, openai_fake))
    master = await _master_id(client)
    for bad in ({"text": ""}, {"text": "x", "env": {"bogus": True}},
                {"text": "x", "mode": "sideways"}, {"text": "x", "params": {"max_steps": 0}}):
        with pytest.raises(InvalidInput):
            core.tours.start(TourRequest(chat_id=chat, user_id=master, role="master", **bad))
    assert await messages(client, chat) == []


async def test_r14_0_env_overrides_are_the_masters_and_channel_flags_anyones(
    client: httpx.AsyncClient, core: Core, openai_fake: FakeUpstream
) -> None:
    chat = await new_chat(client, await fake_connection(client, openai_fake))
    master = await _master_id(client)
    openai_fake.script.reply("ok").reply("ok")
    running = core.tours.start(TourRequest(
        chat_id=chat, user_id=master, role="trusted", text="hi", env={"master": True},
        channel_env={"telegram": True}))
    tour = await running.result()
    assert tour.env["telegram"] is True and tour.env["master"] is False
    assert tour.env_overrides is None


async def test_r14_0_default_connection_is_the_one_new_chats_get(
    client: httpx.AsyncClient, openai_fake: FakeUpstream
) -> None:
    conn = await fake_connection(client, openai_fake)
    mock = (await client.post("/v1/chats", json={})).json()["connection_id"]
    assert mock != conn

    r = await client.patch("/v1/settings", json={"default_connection_id": conn})
    assert r.status_code == 200, r.text
    assert r.json()["default_connection_id"] == conn
    assert (await client.get("/v1/settings")).json()["default_connection_id"] == conn
    chat = (await client.post("/v1/chats", json={})).json()
    assert chat["connection_id"] == conn
    openai_fake.script.reply("From the default.")
    events = await stream(client, chat["id"], "Hi")
    assert [d["content"] for n, d in events if n == "message"] == ["From the default."]

    r = await client.patch("/v1/settings", json={"default_connection_id": "nope"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    assert (await client.get("/v1/settings")).json()["default_connection_id"] == conn

    guest = await make_user(client, "trusted")
    r = await client.patch("/v1/settings", json={"default_connection_id": None},
                           headers={"Authorization": f"Bearer {guest}"})
    assert r.status_code == 403

    r = await client.patch("/v1/settings", json={"default_connection_id": None})
    assert r.json()["default_connection_id"] is None
    assert (await client.post("/v1/chats", json={})).json()["connection_id"] == mock


async def test_r14_0_a_deleted_default_falls_back_to_mock(
    client: httpx.AsyncClient, openai_fake: FakeUpstream
) -> None:
    conn = await fake_connection(client, openai_fake)
    mock = (await client.post("/v1/chats", json={})).json()["connection_id"]
    await client.patch("/v1/settings", json={"default_connection_id": conn})
    assert (await client.delete(f"/v1/connections/{conn}")).status_code in (200, 204)
    assert (await client.get("/v1/settings")).json()["default_connection_id"] is None
    assert (await client.post("/v1/chats", json={})).json()["connection_id"] == mock


async def test_r14_0_a_chat_whose_connection_was_deleted_answers_on_the_default(
    client: httpx.AsyncClient, openai_fake: FakeUpstream
) -> None:
    gone = await fake_connection(client, openai_fake, name="to be deleted")
    chat = (await client.post("/v1/chats", json={"connection_id": gone})).json()["id"]
    openai_fake.script.reply("Before.")
    assert [d["content"] for n, d in await stream(client, chat, "Hi")
            if n == "message"] == ["Before."]
    assert (await client.delete(f"/v1/connections/{gone}")).status_code == 204
    assert (await client.get(f"/v1/chats/{chat}")).json()["connection_id"] is None

    # no default set: the built-in mock answers, and nothing the person wrote is lost
    events = await stream(client, chat, "Still there?")
    assert [n for n, _ in events if n == "error"] == []
    assert [d["content"] for n, d in events if n == "message"] != []
    said = [m["content"] for m in (await messages(client, chat)) if m["role"] == "user"]
    assert said == ["Hi", "Still there?"]

    # a default set later: the chat names none, so it follows the default
    default = await fake_connection(client, openai_fake, name="the default")
    await client.patch("/v1/settings", json={"default_connection_id": default})
    openai_fake.script.reply("From the default.")
    events = await stream(client, chat, "And now?")
    assert [d["content"] for n, d in events if n == "message"] == ["From the default."]
