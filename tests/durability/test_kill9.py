"""R7: SIGKILL in the middle of writes loses nothing committed and leaves a consistent database."""

from __future__ import annotations

import threading
import time

import httpx
from sqlalchemy import select, text

from evacore.core import start_core
from evacore.store.tables import Message, Tour
from tests.conftest import MASTER_TOKEN, wipe
from tests.helpers import ServerProcess


def _writer(server: ServerProcess, chat_id: str, acked: list[str], stop: threading.Event) -> None:
    with httpx.Client(base_url=server.url, headers=server.headers(), timeout=10) as c:
        i = 0
        while not stop.is_set():
            try:
                r = c.post(f"/v1/chats/{chat_id}/messages",
                           json={"role": "user", "content": f"line {i}"})
            except httpx.HTTPError:
                return
            if r.status_code == 201:
                acked.append(r.json()["id"])
            i += 1


async def test_r7_kill9_mid_writes_keeps_every_committed_message(settings, tmp_path) -> None:
    await wipe(settings.db_url)
    server = ServerProcess(tmp_path / "srv", settings.db_url, MASTER_TOKEN).start()
    try:
        with httpx.Client(base_url=server.url, headers=server.headers(), timeout=10) as c:
            chat_id = c.post("/v1/chats", json={"title": "durable"}).json()["id"]
            slow = c.post("/v1/connections", json={
                "name": "slow", "kind": "mock", "params": {"script": [
                    {"text": "slow answer", "delay": 30}]}}).json()["id"]
            busy = c.post("/v1/chats", json={"connection_id": slow}).json()["id"]
        gen = threading.Thread(target=lambda: _post_quiet(server, busy), daemon=True)
        gen.start()
        acked: list[str] = []
        stop = threading.Event()
        writers = [threading.Thread(target=_writer, args=(server, chat_id, acked, stop))
                   for _ in range(3)]
        for w in writers:
            w.start()
        deadline = time.monotonic() + 20
        while len(acked) < 60 and time.monotonic() < deadline:
            time.sleep(0.05)
        server.kill()
        stop.set()
        for w in writers:
            w.join(timeout=10)
    finally:
        server.kill()
    assert len(acked) >= 60, "the writers did not get going"
    core = await start_core(settings.model_copy(update={"data_dir": tmp_path / "srv"}))
    try:
        async with core.session() as s:
            stored = set((await s.scalars(
                select(Message.id).where(Message.chat_id == chat_id))).all())
            statuses = (await s.scalars(select(Tour.status).where(Tour.chat_id == busy))).all()
            if settings.db_url.startswith("sqlite"):
                assert (await s.execute(text("PRAGMA integrity_check"))).scalar() == "ok"
            positions = (await s.scalars(
                select(Message.position).where(Message.chat_id == chat_id))).all()
        assert set(acked) <= stored, f"lost {len(set(acked) - stored)} committed messages"
        assert len(positions) == len(set(positions))
        assert "running" not in statuses and "interrupted" in statuses
    finally:
        await core.aclose()


def _post_quiet(server: ServerProcess, chat_id: str) -> None:
    try:
        httpx.post(f"{server.url}/v1/chats/{chat_id}/generate", headers=server.headers(),
                   json={"message": {"content": "hi"}, "stream": False}, timeout=60)
    except httpx.HTTPError:
        pass
