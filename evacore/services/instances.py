"""The instances serving one database (R14.5): each claims its id at start, writes a heartbeat
every few seconds, and marks `interrupted` the running tours of any instance whose heartbeat
stopped, so a killed instance's tours are settled by the others within half a minute.

Must not: touch the tours of a live instance: at start an instance settles only its own
previous life's tours (same id) and those of instances already silent past the bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import secrets
import socket
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from sqlalchemy import bindparam, delete, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from evacore.domain.ids import utcnow
from evacore.logs import get_logger
from evacore.store import direct
from evacore.store.lean import transact
from evacore.store.tables import Instance, Tour
from evacore.ticks import sleep_to_next

if TYPE_CHECKING:
    from pathlib import Path

    from evacore.store.db import Database

log = get_logger(__name__)

HEARTBEAT_SECONDS = 5.0
STALE_SECONDS = 20.0
"""Defaults of `heartbeat_seconds` and `stale_seconds`: an instance silent this long is gone
and its running tours become `interrupted`."""

# Built once: every instance runs them every `HEARTBEAT_SECONDS`, busy or idle.
_INSTANCES, _TOURS = Instance.__table__, Tour.__table__
_BEAT = (update(_INSTANCES).where(_INSTANCES.c.id == bindparam("p_id"))
         .values(heartbeat_at=bindparam("p_at")).returning(_INSTANCES.c.id))
_STALE = (select(_INSTANCES.c.id).where(_INSTANCES.c.heartbeat_at < bindparam("p_cutoff"))
          .with_for_update(skip_locked=True))
_SETTLE_UNREGISTERED = (
    update(_TOURS).where(
        _TOURS.c.status == "running",
        or_(_TOURS.c.instance_id.is_(None),
            _TOURS.c.instance_id.not_in(select(_INSTANCES.c.id))),
        _TOURS.c.created_at < bindparam("p_cutoff"))
    .values(status="interrupted", finished_at=bindparam("p_at")).returning(_TOURS.c.id))
"""`sweep`'s tours that name no registered instance (or none)."""
_SETTLE_OF = (
    update(_TOURS).where(
        _TOURS.c.status == "running",
        _TOURS.c.instance_id.in_(bindparam("p_ids", expanding=True)),
        _TOURS.c.created_at < bindparam("p_cutoff"))
    .values(status="interrupted", finished_at=bindparam("p_at")).returning(_TOURS.c.id))
"""`sweep`'s tours of the silent instances (still registered until it removes them)."""


def default_instance_id(data_dir: Path) -> str:
    """Stable across restarts of one installation: the host name and the data folder."""
    host = socket.gethostname()
    folder = hashlib.sha256(str(data_dir.resolve()).encode()).hexdigest()[:8]
    return f"{host[:40]}-{folder}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


async def claim(session: AsyncSession, wanted: str, stale_seconds: float = STALE_SECONDS) -> str:
    """Take the id `wanted` (or, when a live process on this host holds it, a fresh variant
    of it), settle the tours of its previous life and of silent instances, and register."""
    host, pid = socket.gethostname(), os.getpid()
    row = await session.get(Instance, wanted)
    instance_id = wanted
    if row is not None and row.hostname == host and row.pid != pid and _alive(row.pid):
        instance_id = f"{wanted[:50]}-{secrets.token_hex(4)}"
        log.warning("instance.id_in_use", wanted=wanted, using=instance_id, pid=row.pid)
    elif row is not None and row.hostname != host:
        stale = _aware(row.heartbeat_at) < utcnow() - timedelta(seconds=stale_seconds)
        if not stale:
            instance_id = f"{wanted[:50]}-{secrets.token_hex(4)}"
            log.warning("instance.id_in_use", wanted=wanted, using=instance_id,
                        host=row.hostname)
    await settle(session, [instance_id])
    await sweep(session, stale_seconds)
    await session.execute(delete(Instance).where(Instance.id == instance_id))
    now = utcnow()
    session.add(Instance(id=instance_id, hostname=host, pid=pid, started_at=now,
                         heartbeat_at=now))
    await session.flush()
    return instance_id


def _aware(value: datetime) -> datetime:
    """SQLite gives naive datetimes back; they were written in UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


async def settle(session: AsyncSession, instance_ids: list[str]) -> int:
    """Tours left `running` by these instances become `interrupted` (R7)."""
    if not instance_ids:
        return 0
    result = await session.execute(
        update(Tour).where(Tour.status == "running", Tour.instance_id.in_(instance_ids))
        .values(status="interrupted", finished_at=utcnow()))
    count = result.rowcount or 0
    if count:
        log.warning("tours.interrupted", count=count, instances=instance_ids)
    return count


async def sweep(session: AsyncSession, stale_seconds: float = STALE_SECONDS) -> int:
    """Settle the tours of every instance silent past `stale_seconds`, and of tours that name
    no registered instance (left by a release without heartbeats)."""
    cutoff = utcnow() - timedelta(seconds=stale_seconds)
    # A row another transaction holds belongs to an instance in the middle of its beat: alive,
    # and waiting for that lock could hang this start or beat behind a stalled process.
    stale = [row[0] for row in await direct.execute(session, _STALE, {"p_cutoff": cutoff})]
    now = utcnow()
    # pre-built, run on the driver on SQLite (a beat every few seconds, busy or idle); the
    # silent instances' own tours only when there are some (an expanding list goes through
    # the session)
    count = len(await direct.execute(session, _SETTLE_UNREGISTERED,
                                     {"p_cutoff": cutoff, "p_at": now}))
    if stale:
        count += len(await direct.execute(session, _SETTLE_OF,
                                          {"p_ids": stale, "p_cutoff": cutoff, "p_at": now}))
        await session.execute(delete(Instance).where(Instance.id.in_(stale)))
    if count:
        log.warning("tours.interrupted", count=count, instances=stale, reason="heartbeat")
    return count


class Heartbeat:
    """This instance's sign of life, and the sweep of silent ones, every HEARTBEAT_SECONDS."""

    def __init__(self, db: Database, instance_id: str, every: float = HEARTBEAT_SECONDS,
                 stale_seconds: float = STALE_SECONDS) -> None:
        self.db, self.instance_id, self.every = db, instance_id, every
        self.stale_seconds = stale_seconds
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="heartbeat")

    async def beat(self) -> None:
        await transact(self.db, self._beat)  # lean on SQLite

    async def _beat(self, s: AsyncSession) -> None:
        now = utcnow()
        if not await direct.execute(s, _BEAT, {"p_id": self.instance_id, "p_at": now}):
            # swept while this process was stalled: register again
            s.add(Instance(id=self.instance_id, hostname=socket.gethostname(),
                           pid=os.getpid(), started_at=now, heartbeat_at=now))
        await sweep(s, self.stale_seconds)

    async def _run(self) -> None:
        while True:
            await sleep_to_next(self.every)
            try:
                await self.beat()
            except Exception:
                log.warning("instance.heartbeat_failed", exc_info=True)

    async def aclose(self) -> None:
        """Stop beating and leave the register (the caller settled its tours already)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        with contextlib.suppress(Exception):
            async with self.db.session() as s:
                await s.execute(delete(Instance).where(Instance.id == self.instance_id))
