"""Roles (SPEC §1) bound what a request may ask of a connection: a non-master's
`params.max_tokens` is lowered to the connection's `max_tokens` (and the tour's diagnostics
say so); a smaller one is honoured; the master, who owns the connection, may ask for more.
Checked at the real edge: the fake upstream records the body it received."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import make_user
from tests.fakes.upstream import FakeUpstream
from tests.generate.helpers import fake_connection, tour_of

CONNECTION_MAX = 128


async def _ask(client: httpx.AsyncClient, fake: FakeUpstream, headers: dict[str, str],
               max_tokens: int, *, stream: bool = False) -> str:
    conn = await fake_connection(client, fake, max_tokens=CONNECTION_MAX)
    chat = await client.post("/v1/chats", headers=headers, json={"connection_id": conn})
    assert chat.status_code == 201, chat.text
    fake.script.reply("Short.")
    r = await client.post(f"/v1/chats/{chat.json()['id']}/generate", headers=headers,
                          json={"message": {"content": "write a lot"}, "stream": stream,
                                "params": {"max_tokens": max_tokens}})
    assert r.status_code == 200, r.text
    return r.headers.get("X-Tour-Id") or r.json()["tour_id"]


@pytest.mark.parametrize("role", ["guest", "trusted"])
async def test_roles_a_non_master_cannot_raise_max_tokens_past_the_connections(
    client: httpx.AsyncClient, openai_fake: FakeUpstream, role: str
) -> None:
    headers = {"Authorization": f"Bearer {await make_user(client, role)}"}
    tour_id = await _ask(client, openai_fake, headers, 999_999)
    assert openai_fake.last_body["max_tokens"] == CONNECTION_MAX
    diagnostics = (await tour_of(client, tour_id))["diagnostics"]
    assert diagnostics["max_tokens"]["asked"] == 999_999
    assert diagnostics["max_tokens"]["sent"] == CONNECTION_MAX
    await _ask(client, openai_fake, headers, 50, stream=True)
    assert openai_fake.last_body["max_tokens"] == 50, "a lower limit is the caller's to choose"


async def test_roles_the_bound_holds_for_text_adapters_too(
    client: httpx.AsyncClient, kobold_fake: FakeUpstream
) -> None:
    headers = {"Authorization": f"Bearer {await make_user(client, 'guest')}"}
    await _ask(client, kobold_fake, headers, 999_999)
    assert kobold_fake.last_body["max_length"] == CONNECTION_MAX


async def test_roles_the_master_may_ask_for_more_than_the_connections(
    client: httpx.AsyncClient, openai_fake: FakeUpstream
) -> None:
    tour_id = await _ask(client, openai_fake, {}, 4096)
    assert openai_fake.last_body["max_tokens"] == 4096
    assert "max_tokens" not in (await tour_of(client, tour_id))["diagnostics"]
