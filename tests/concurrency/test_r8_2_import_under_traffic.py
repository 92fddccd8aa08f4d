"""R8.2 beside R2.1: a long SillyTavern chat imported while generates run on other chats. Over
a real socket, no generate fails or waits past its timeouts ("database is locked" was the
failure), and the import lands whole. 15,000 lines by default; the 60,000-line soak is marked
`slow` (`pytest -m slow`)."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import httpx
import orjson
import pytest

from evacore.config import Settings
from tests.conftest import MASTER_TOKEN, wipe
from tests.helpers import ServerProcess


def _big_chat(lines: int) -> bytes:
    rows = [orjson.dumps({"user_name": "You", "character_name": "Aqua",
                          "create_date": 1674559896839})]
    for i in range(lines - 1):
        user = i % 2 == 0
        rows.append(orjson.dumps({
            "name": "You" if user else "Aqua", "is_user": user, "is_name": True,
            "send_date": 1674563371558 + i * 1000,
            "mes": f"line {i}: " + ("a question about the town square " if user
                                    else "an answer about the goddess of water ") * 3,
            **({} if user else {"swipes": [f"answer {i}", f"other {i}"], "swipe_id": 0}),
        }))
    return b"\n".join(rows) + b"\n"


@pytest.mark.parametrize("lines", [
    pytest.param(15_000, id="15k"), pytest.param(60_000, id="60k", marks=pytest.mark.slow)])
def test_r8_2_a_long_import_under_generate_traffic_fails_no_request(
    settings: Settings, tmp_path: Path, lines: int
) -> None:
    asyncio.run(wipe(settings.db_url))
    server = ServerProcess(tmp_path / "s", settings.db_url, MASTER_TOKEN).start()
    data = _big_chat(lines)
    try:
        with httpx.Client(base_url=server.url, headers=server.headers(), timeout=120) as c:
            conn = c.post("/v1/connections", json={"name": "mock", "kind": "mock"}).json()["id"]
            chats = [c.post("/v1/chats", json={"connection_id": conn}).json()["id"]
                     for _ in range(3)]
        imported: list[httpx.Response] = []
        failures: list[str] = []
        sent = 0
        stop = threading.Event()

        def load(chat: str) -> None:
            nonlocal sent
            with httpx.Client(base_url=server.url, headers=server.headers(),
                              timeout=30) as c:
                while not stop.is_set():
                    r = c.post(f"/v1/chats/{chat}/generate",
                               json={"message": {"content": "hello"}, "stream": False})
                    sent += 1
                    if r.status_code != 200:
                        failures.append(f"{r.status_code} {r.text[:300]}")

        def do_import() -> None:
            with httpx.Client(base_url=server.url, headers=server.headers(),
                              timeout=300) as c:
                imported.append(c.post("/v1/chats/import",
                                       files={"file": ("big.jsonl", data)}))

        workers = [threading.Thread(target=load, args=(chat,)) for chat in chats]
        for w in workers:
            w.start()
        time.sleep(0.5)
        started = time.monotonic()
        importer = threading.Thread(target=do_import)
        importer.start()
        importer.join()
        took = time.monotonic() - started
        stop.set()
        for w in workers:
            w.join()
        assert imported and imported[0].status_code == 201, imported[0].text[:500]
        assert imported[0].json()["messages"] == lines - 1
        assert not failures, failures[:3]
        assert sent > 3, sent
        print(f"import of {lines} lines took {took:.1f} s beside {sent} generates")
    finally:
        server.kill()
