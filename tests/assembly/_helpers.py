"""Helpers for the prompt-assembly tests: cards, personas, chats, tours and what they sent.

Must not: assemble prompts itself; every check reads what a real tour recorded.
"""

from __future__ import annotations

from typing import Any

import httpx

from evacore.formats.cards import Card, read_card
from tests.helpers import (
    FIXTURES,
    parse_sse,  # noqa: F401 - re-exported for the tests here
)

CARDS = FIXTURES / "cards"
SERAPHINA = "st_default_Seraphina.v2.png"
DEFAULT_CHAN = "choral_Default-chan.ccv3-only.png"
AQUA = "tavernai_Aqua.v1.png"
AMY = "st_content_Amy.chara-and-ccv3.png"


def card_of(filename: str) -> Card:
    return read_card((CARDS / filename).read_bytes())


async def import_card(client: httpx.AsyncClient, filename: str) -> str:
    """Import a fixture card through `POST /v1/characters`; returns the character id."""
    data = (CARDS / filename).read_bytes()
    r = await client.post("/v1/characters", files={"file": (filename, data, "image/png")})
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def persona(client: httpx.AsyncClient, name: str, description: str = "") -> str:
    r = await client.post("/v1/personas", json={"name": name, "description": description})
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def connection(client: httpx.AsyncClient, kind: str = "mock", **fields: Any) -> str:
    body: dict[str, Any] = {"name": f"assembly {kind}", "kind": kind, **fields}
    r = await client.post("/v1/connections", json=body)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def chat(client: httpx.AsyncClient, connection_id: str | None = None,
               **fields: Any) -> str:
    body = dict(fields)
    if connection_id is not None:
        body["connection_id"] = connection_id
    r = await client.post("/v1/chats", json=body)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def send(client: httpx.AsyncClient, chat_id: str, text: str | None,
               **body: Any) -> dict[str, Any]:
    """One non-stream tour; returns its JSON answer (asserts HTTP 200)."""
    if text is not None:
        body["message"] = {"content": text}
    r = await client.post(f"/v1/chats/{chat_id}/generate", json={"stream": False, **body})
    assert r.status_code == 200, r.text
    return dict(r.json())


async def tour(client: httpx.AsyncClient, tour_id: str) -> dict[str, Any]:
    r = await client.get(f"/v1/tours/{tour_id}")
    assert r.status_code == 200, r.text
    return dict(r.json())


async def sent_body(client: httpx.AsyncClient, tour_id: str) -> dict[str, Any]:
    """The request body the tour's first step sent to the provider."""
    return dict((await tour(client, tour_id))["diagnostics"]["requests"][0]["body"])


def added_by(diagnostics: dict[str, Any], stage: str) -> list[str]:
    """Element ids the named stage added, in the order it added them."""
    return [i for c in diagnostics["changes"] if c["stage"] == stage for i in c["added"]]


async def messages(client: httpx.AsyncClient, chat_id: str) -> list[dict[str, Any]]:
    r = await client.get(f"/v1/chats/{chat_id}/messages")
    assert r.status_code == 200, r.text
    return list(r.json()["messages"])


async def chat_json(client: httpx.AsyncClient, chat_id: str) -> dict[str, Any]:
    r = await client.get(f"/v1/chats/{chat_id}")
    assert r.status_code == 200, r.text
    return dict(r.json())


