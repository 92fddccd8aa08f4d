"""R2.1 and R14.5 together: two `evacore serve` processes on one database take turns on one
chat. Generates sent to both at once all answer 200; the chat holds each message once,
each followed by its own answer; `turn` counts them all."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from evacore.config import Settings
from tests.conftest import MASTER_TOKEN, wipe
from tests.generate.helpers import shown
from tests.helpers import ServerProcess, server_pair


@pytest.fixture
def pair(settings: Settings, tmp_path: Path) -> Any:
    asyncio.run(wipe(settings.db_url))
    with server_pair(tmp_path, settings.db_url, MASTER_TOKEN) as pair:
        yield pair


def test_r14_5_generates_on_two_instances_take_turns_on_one_chat(pair: Any) -> None:
    a, b = pair
    with httpx.Client(base_url=a.url, headers=a.headers(), timeout=60) as c:
        conn = c.post("/v1/connections", json={
            "name": "slow", "kind": "mock",
            "params": {"script": [{"delay": 0.3, "token_delay": 0.02}]}}).json()["id"]
        chat = c.post("/v1/chats", json={"connection_id": conn}).json()["id"]

    def send(server: ServerProcess, text: str) -> httpx.Response:
        with httpx.Client(base_url=server.url, headers=server.headers(), timeout=60) as c:
            return c.post(f"/v1/chats/{chat}/generate",
                          json={"message": {"content": text}, "stream": False})

    said = [f"through {'ab'[i % 2]} number {i}" for i in range(6)]
    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(lambda i: send((a, b)[i % 2], said[i]), range(6)))
    assert [r.status_code for r in answers] == [200] * 6, [r.text for r in answers]
    with httpx.Client(base_url=b.url, headers=b.headers(), timeout=10) as c:
        stored = c.get(f"/v1/chats/{chat}/messages").json()["messages"]
        turn = c.get(f"/v1/chats/{chat}").json()["turn"]
    roles = [m["role"] for m in stored]
    assert roles == ["user", "assistant"] * 6, roles
    pairs = [(shown(stored[i]), shown(stored[i + 1])) for i in range(0, 12, 2)]
    assert sorted(u for u, _ in pairs) == sorted(said)
    assert all(answer == f"(mock) You said: {user}" for user, answer in pairs), pairs
    assert turn == 6
