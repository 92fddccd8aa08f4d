"""Shared steps of the stream-rules integration tests: rules, chats and tours through the API."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx
from sqlalchemy import delete

from evacore.core import Core
from evacore.store.tables import StreamRule
from tests.api.test_generate_basic import parse_sse

SEEDED = (
    "look_before_refusing", "local_shell_for_his_machine", "telegram_markdown_image",
    "telegram_react_not_emoji", "telegram_reply_tail", "write_diff_over_write_file",
)


@dataclass
class Run:
    """One tour as the client and the upstream saw it."""

    tour_id: str
    content: str
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    raw: str = ""
    """The whole SSE body or JSON response."""
    diagnostics: dict[str, Any] = field(default_factory=dict)
    status: str = ""

    def names(self) -> list[str]:
        return [name for name, _ in self.events]

    def of(self, name: str) -> list[dict[str, Any]]:
        return [data for n, data in self.events if n == name]

    @property
    def requests(self) -> list[list[dict[str, Any]]]:
        """The messages of each provider request, in order."""
        return [r["body"]["messages"] for r in self.diagnostics.get("requests", [])]


async def add_rule(client: httpx.AsyncClient, **fields: Any) -> dict[str, Any]:
    r = await client.post("/v1/rules", json=fields)
    assert r.status_code == 201, r.text
    return r.json()


async def clear_rules(core: Core) -> None:
    """Delete every rule (the seeded ones too) straight in the database: test setup only."""
    async with core.session() as s:
        await s.execute(delete(StreamRule))


async def new_chat(client: httpx.AsyncClient, script: list[dict[str, Any]], **headers: str) -> str:
    r = await client.post("/v1/connections", json={"name": "m", "kind": "mock",
                                                   "params": {"script": script}})
    assert r.status_code == 201, r.text
    r = await client.post("/v1/chats", json={"connection_id": r.json()["id"]},
                          headers=headers or None)
    assert r.status_code == 201, r.text
    return r.json()["id"]


async def generate(client: httpx.AsyncClient, chat_id: str, content: str, *, stream: bool = True,
                   env: dict[str, bool] | None = None, headers: dict[str, str] | None = None,
                   ) -> Run:
    body: dict[str, Any] = {"message": {"content": content}, "stream": stream}
    if env is not None:
        body["env"] = env
    r = await client.post(f"/v1/chats/{chat_id}/generate", json=body, headers=headers)
    assert r.status_code == 200, r.text
    if stream:
        events = parse_sse(r.text)
        tour_id = events[0][1]["tour_id"]
        done = [d for n, d in events if n == "message"]
        run = Run(tour_id, done[0]["content"] if done else "", events, r.text)
    else:
        run = Run(r.json()["tour_id"], r.json()["content"], raw=r.text)
    tour = (await client.get(f"/v1/tours/{run.tour_id}", headers=headers)).json()
    run.diagnostics, run.status = tour["diagnostics"], tour["status"]
    return run


async def messages(client: httpx.AsyncClient, chat_id: str) -> list[dict[str, Any]]:
    return (await client.get(f"/v1/chats/{chat_id}/messages")).json()["messages"]


async def fired(client: httpx.AsyncClient) -> dict[str, tuple[int, int]]:
    """(fired, retried) per rule from GET /v1/stats."""
    rows = (await client.get("/v1/stats")).json()["rules"]
    return {row["rule"]: (row["fired"], row["retried"]) for row in rows}
