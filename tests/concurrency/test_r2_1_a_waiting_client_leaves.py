"""R2.1 stage 1 over a real socket: a stream client whose generate waits behind the chat's
running tour and who closes the connection meanwhile stores nothing; the chat goes on."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

import httpx
import orjson

from evacore.config import Settings
from tests.conftest import MASTER_TOKEN, wipe
from tests.helpers import ServerProcess


def test_r2_1_a_stream_client_leaving_its_place_in_the_queue_stores_nothing(
    settings: Settings, tmp_path: Path
) -> None:
    asyncio.run(wipe(settings.db_url))
    server = ServerProcess(tmp_path / "s", settings.db_url, MASTER_TOKEN).start()
    try:
        with httpx.Client(base_url=server.url, headers=server.headers(), timeout=30) as c:
            conn = c.post("/v1/connections", json={
                "name": "slow", "kind": "mock",
                "params": {"script": [{"match": "slow", "delay": 1.5}, {"delay": 0}]}}).json()
            chat = c.post("/v1/chats", json={"connection_id": conn["id"]}).json()["id"]
            with c.stream("POST", f"/v1/chats/{chat}/generate",
                          json={"message": {"content": "slow one"}}) as first:
                assert first.status_code == 200
                # a raw client: its request waits for the chat, then it hangs up
                body = orjson.dumps({"message": {"content": "left while waiting"}})
                raw = socket.create_connection(("127.0.0.1", server.port))
                raw.sendall(
                    f"POST /v1/chats/{chat}/generate HTTP/1.1\r\nHost: x\r\n"
                    f"Authorization: Bearer {MASTER_TOKEN}\r\n"
                    f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
                    .encode() + body)
                time.sleep(0.4)
                raw.close()
                text = "".join(first.iter_text())
            assert "event: done" in text
            time.sleep(0.5)
            stored = c.get(f"/v1/chats/{chat}/messages").json()["messages"]
            assert [m["content"] for m in stored if m["role"] == "user"] == ["slow one"]
            assert c.get("/v1/stats").json()["tours"].get("running", 0) == 0
            r = c.post(f"/v1/chats/{chat}/generate",
                       json={"message": {"content": "next"}, "stream": False})
            assert r.status_code == 200 and r.json()["content"] == "(mock) You said: next"
    finally:
        server.kill()
