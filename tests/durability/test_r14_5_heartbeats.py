"""R14.5 / R7: instances on one database watch each other's heartbeats. An instance killed with
SIGKILL mid-tour has that tour marked `interrupted` by another within the bound (the user's
message kept); a live instance's tours are never touched by another's start or sweep."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy import insert, select, update

from evacore.config import Settings
from evacore.core import start_core
from evacore.domain.ids import utcnow
from evacore.store.db import create_engine
from evacore.store.tables import Instance, Message, Tour
from tests.conftest import MASTER_TOKEN, wipe
from tests.helpers import ServerProcess

BEAT = {"EVACORE_HEARTBEAT_SECONDS": "0.5", "EVACORE_STALE_SECONDS": "3"}


def _slow_chat(server: ServerProcess, delay: float) -> str:
    with httpx.Client(base_url=server.url, headers=server.headers(), timeout=10) as c:
        slow = c.post("/v1/connections", json={
            "name": "slow", "kind": "mock",
            "params": {"script": [{"text": "a slow answer", "delay": delay}]}}).json()["id"]
        return c.post("/v1/chats", json={"connection_id": slow}).json()["id"]


def _generate_quietly(server: ServerProcess, chat_id: str, out: list[int]) -> None:
    try:
        r = httpx.post(f"{server.url}/v1/chats/{chat_id}/generate", headers=server.headers(),
                       json={"message": {"content": "hello there"}, "stream": False},
                       timeout=60)
        out.append(r.status_code)
    except httpx.HTTPError:
        out.append(0)


async def _tour_status(core, chat_id: str) -> str | None:
    async with core.session() as s:
        return (await s.scalars(select(Tour.status).where(Tour.chat_id == chat_id))).first()


async def _wait_status(core, chat_id: str, want: str, within: float) -> float:
    started = time.monotonic()
    while (status := await _tour_status(core, chat_id)) != want:
        assert time.monotonic() - started < within, f"tour still {status!r}"
        await asyncio.sleep(0.1)
    return time.monotonic() - started


async def test_r14_5_a_killed_instance_s_tour_is_settled_by_another(
    settings: Settings, tmp_path: Path
) -> None:
    await wipe(settings.db_url)
    a = ServerProcess(tmp_path / "a", settings.db_url, MASTER_TOKEN, **BEAT).start()
    b = await start_core(settings.model_copy(update={"heartbeat_seconds": 0.5,
                                                     "stale_seconds": 3.0}))
    try:
        chat = _slow_chat(a, delay=60)
        statuses: list[int] = []
        threading.Thread(target=_generate_quietly, args=(a, chat, statuses), daemon=True).start()
        await _wait_status(b, chat, "running", within=20)
        async with b.session() as s:
            ids = set((await s.scalars(select(Instance.id))).all())
        assert b.instance_id in ids and len(ids) == 2

        await asyncio.sleep(4.5)  # longer than the bound: A beats, so B leaves its tour alone
        assert await _tour_status(b, chat) == "running"

        a.kill()
        took = await _wait_status(b, chat, "interrupted", within=10)
        assert took < 3.0 + 0.5 + 2.0
        async with b.session() as s:
            said = (await s.scalars(select(Message.content).where(Message.chat_id == chat))).all()
            ids = set((await s.scalars(select(Instance.id))).all())
        assert "hello there" in said
        assert ids == {b.instance_id}
    finally:
        a.kill()
        await b.aclose()


async def test_r14_5_restarting_one_instance_leaves_another_s_tour_running(
    settings: Settings, tmp_path: Path
) -> None:
    await wipe(settings.db_url)
    a = ServerProcess(tmp_path / "a", settings.db_url, MASTER_TOKEN, **BEAT).start()
    b = ServerProcess(tmp_path / "b", settings.db_url, MASTER_TOKEN, **BEAT).start()
    watcher = await start_core(settings.model_copy(update={"heartbeat_seconds": 0.5,
                                                           "stale_seconds": 3.0}))
    try:
        chat = _slow_chat(b, delay=10)
        statuses: list[int] = []
        runner = threading.Thread(target=_generate_quietly, args=(b, chat, statuses))
        runner.start()
        await _wait_status(watcher, chat, "running", within=20)
        a.kill()
        # a restart of A, same data dir and so the same instance id; off the loop, so the
        # watcher here goes on beating meanwhile as an instance does
        await asyncio.to_thread(a.start)
        assert await _tour_status(watcher, chat) in ("running", "completed")
        await _wait_status(watcher, chat, "completed", within=40)
        await asyncio.to_thread(runner.join, 30)
        assert statuses == [200]
    finally:
        a.kill()
        b.kill()
        await watcher.aclose()


async def test_r14_5_an_instance_stalled_in_its_beat_never_holds_up_another_s_start(
    settings: Settings, backend: str
) -> None:
    """An instance whose heartbeat is old but whose row is locked by its open transaction is in
    the middle of a beat (stalled, not dead): a starting instance leaves it for a later sweep
    instead of waiting on its lock, which would hang the start as long as the stall lasts."""
    if backend != "postgresql":
        pytest.skip("SQLite locks the whole database file, not rows")
    await wipe(settings.db_url)
    engine = create_engine(settings.db_url)
    old = utcnow() - timedelta(seconds=60)
    async with engine.begin() as conn:
        await conn.execute(insert(Instance).values(id="stalled", hostname="elsewhere", pid=1,
                                                   started_at=old, heartbeat_at=old))
    stalled = await engine.connect()
    try:
        await stalled.execute(update(Instance).where(Instance.id == "stalled")
                              .values(heartbeat_at=old))  # its beat began, then it stalled
        core = await asyncio.wait_for(start_core(settings.model_copy(
            update={"stale_seconds": 3.0})), timeout=15)
        try:
            await asyncio.wait_for(core.heartbeat.beat(), timeout=5)
            async with core.session() as s:
                ids = set((await s.scalars(select(Instance.id))).all())
            assert ids == {core.instance_id, "stalled"}
            await stalled.rollback()  # the stall ends without a beat: now it is silent
            await core.heartbeat.beat()
            async with core.session() as s:
                ids = set((await s.scalars(select(Instance.id))).all())
            assert ids == {core.instance_id}
        finally:
            await core.aclose()
    finally:
        await stalled.close()
        await engine.dispose()


@pytest.mark.both_backends
async def test_r14_5_a_beat_settles_old_tours_of_no_registered_instance_only(core) -> None:
    """With no instance silent, a beat's sweep settles the running tours older than the bound
    that name no registered instance (or none): a live instance's tours, a newer tour and a
    finished one stay as they are."""
    from evacore.services.instances import Heartbeat

    old = utcnow() - timedelta(seconds=60)
    async with core.session() as s:
        await s.execute(insert(Instance), [{
            "id": "alive-elsewhere", "hostname": "h", "pid": 1, "started_at": old,
            "heartbeat_at": utcnow()}])
        await s.execute(insert(Tour), [
            {"id": "t-ghost", "instance_id": "ghost", "status": "running", "created_at": old},
            {"id": "t-nobody", "instance_id": None, "status": "running", "created_at": old},
            {"id": "t-alive", "instance_id": "alive-elsewhere", "status": "running",
             "created_at": old},
            {"id": "t-new", "instance_id": "ghost", "status": "running", "created_at": utcnow()},
            {"id": "t-done", "instance_id": "ghost", "status": "completed", "created_at": old}])
    await Heartbeat(core.db, core.instance_id, stale_seconds=20).beat()
    async with core.session() as s:
        rows = dict((await s.execute(select(Tour.id, Tour.status).where(
            Tour.id.in_(["t-ghost", "t-nobody", "t-alive", "t-new", "t-done"])))).all())
        beat_at = await s.scalar(select(Instance.heartbeat_at).where(
            Instance.id == core.instance_id))
    assert rows == {"t-ghost": "interrupted", "t-nobody": "interrupted", "t-alive": "running",
                    "t-new": "running", "t-done": "completed"}
    assert beat_at is not None
