"""Helpers for the generate tests: connections aimed at a fake, chats, SSE parsing, reads."""

from __future__ import annotations

from typing import Any

import httpx

from tests.fakes.upstream import FAKE_API_KEY, FakeUpstream
from tests.helpers import parse_sse

FAST_TIMEOUTS = {"connect": 2, "first_token": 5, "idle": 5, "total": 20}




def names(events: list[tuple[str, Any]]) -> list[str]:
    return [n for n, _ in events]


def deltas(events: list[tuple[str, Any]]) -> list[str]:
    return [d["text"] for n, d in events if n == "delta"]


def one(events: list[tuple[str, Any]], name: str) -> Any:
    found = [d for n, d in events if n == name]
    assert len(found) == 1, (name, events)
    return found[0]


async def fake_connection(client: httpx.AsyncClient, fake: FakeUpstream, *,
                          kind: str | None = None, **fields: Any) -> str:
    """A connection aimed at `fake` (its kind unless `kind`), fast timeouts, the fake key."""
    params = dict(fields.pop("params", {}))
    params.setdefault("timeouts", dict(FAST_TIMEOUTS))
    body = {
        "name": f"fake {kind or fake.kind}", "kind": kind or fake.kind,
        "base_url": fake.base_url, "api_key": FAKE_API_KEY, "model": "fake-model",
        "context_size": 4096, "max_tokens": 128, "params": params, **fields,
    }
    r = await client.post("/v1/connections", json=body)
    assert r.status_code == 201, r.text
    return r.json()["id"]


async def new_chat(client: httpx.AsyncClient, connection_id: str, **fields: Any) -> str:
    r = await client.post("/v1/chats", json={"connection_id": connection_id, **fields})
    assert r.status_code == 201, r.text
    return r.json()["id"]


async def generate(client: httpx.AsyncClient, chat_id: str, content: str | None = "Hello!",
                   **body: Any) -> httpx.Response:
    if content is not None:
        body.setdefault("message", {"content": content})
    return await client.post(f"/v1/chats/{chat_id}/generate", json=body)


async def stream(client: httpx.AsyncClient, chat_id: str, content: str | None = "Hello!",
                 **body: Any) -> list[tuple[str, Any]]:
    r = await generate(client, chat_id, content, stream=True, **body)
    assert r.status_code == 200, r.text
    return parse_sse(r.text)


async def messages(client: httpx.AsyncClient, chat_id: str) -> list[dict[str, Any]]:
    r = await client.get(f"/v1/chats/{chat_id}/messages")
    assert r.status_code == 200, r.text
    return r.json()["messages"]


async def tour_of(client: httpx.AsyncClient, tour_id: str) -> dict[str, Any]:
    r = await client.get(f"/v1/tours/{tour_id}")
    assert r.status_code == 200, r.text
    return r.json()


def variant(message: dict[str, Any], variant_id: str | None = None) -> dict[str, Any]:
    """The active (or the named) variant of a stored message."""
    wanted = variant_id or message["active_variant"]
    return next(v for v in message["variants"] if v["id"] == wanted)


def shown(message: dict[str, Any]) -> str:
    """What a stored message says: its active variant's text, or its own."""
    return variant(message)["content"] if message.get("active_variant") else message["content"]


async def mock_chat(client: httpx.AsyncClient, script: list[dict[str, Any]]) -> str:
    """A chat on a `mock` connection that follows `script` (evacore/providers/mock.py)."""
    r = await client.post("/v1/connections", json={
        "name": "mock", "kind": "mock", "params": {"script": script}})
    assert r.status_code == 201, r.text
    r = await client.post("/v1/chats", json={"connection_id": r.json()["id"]})
    assert r.status_code == 201, r.text
    return r.json()["id"]
