"""Helpers for driving tours through the HTTP API: scripted mock chats, running a tour,
and reading back what was sent upstream.

Must not: touch the core's internals; everything goes through HTTP as a client would.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx

from tests.api.test_generate_basic import mock_connection, parse_sse


def as_user(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def scripted_chat(client: httpx.AsyncClient, script: list[dict[str, Any]],
                        headers: dict[str, str] | None = None) -> str:
    """A chat (owned by whoever `headers` names, default the master) on a scripted mock."""
    conn = await mock_connection(client, script=script)
    r = await client.post("/v1/chats", json={"connection_id": conn}, headers=headers)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def run_tour(client: httpx.AsyncClient, chat_id: str, content: str,
                   headers: dict[str, str] | None = None,
                   **body: Any) -> tuple[str, list[tuple[str, dict[str, Any]]]]:
    """Run one streamed tour to its end; returns the tour id and the SSE events."""
    r = await client.post(f"/v1/chats/{chat_id}/generate",
                          json={"message": {"content": content}, **body}, headers=headers)
    assert r.status_code == 200, r.text
    events = parse_sse(r.text)
    assert events and events[0][0] == "tour", events
    return str(events[0][1]["tour_id"]), events


async def tour_of(client: httpx.AsyncClient, tour_id: str,
                  headers: dict[str, str] | None = None) -> dict[str, Any]:
    r = await client.get(f"/v1/tours/{tour_id}", headers=headers)
    assert r.status_code == 200, r.text
    return dict(r.json())


async def upstream_bodies(client: httpx.AsyncClient, tour_id: str) -> list[dict[str, Any]]:
    """The provider request bodies of a tour, one per step, from its stored diagnostics."""
    tour = await tour_of(client, tour_id)
    return [req["body"] for req in tour["diagnostics"]["requests"]]


async def offered_tools(client: httpx.AsyncClient, tour_id: str) -> set[str]:
    """Names of the tools the tour's first provider request offered the model."""
    body = (await upstream_bodies(client, tour_id))[0]
    return {t["function"]["name"] for t in body.get("tools", [])}


async def stored_variant(client: httpx.AsyncClient, chat_id: str,
                         headers: dict[str, str] | None = None) -> dict[str, Any]:
    """The active variant of the chat's newest assistant message."""
    r = await client.get(f"/v1/chats/{chat_id}/messages", headers=headers)
    assert r.status_code == 200, r.text
    message = [m for m in r.json()["messages"] if m["role"] == "assistant"][-1]
    return next(v for v in message["variants"] if v["id"] == message["active_variant"])


def named(events: list[tuple[str, dict[str, Any]]], name: str) -> list[dict[str, Any]]:
    return [data for n, data in events if n == name]


def tool_messages(body: dict[str, Any]) -> dict[str, str]:
    """`tool_call_id` → content of the tool messages of one upstream request body."""
    return {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}


async def sse_events(response: httpx.Response) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """The events of a streaming response, each as soon as its frame has arrived."""
    name: str | None = None
    async for line in response.aiter_lines():
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: ") and name is not None:
            yield name, json.loads(line[6:])
            name = None
