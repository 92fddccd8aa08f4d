"""Tokens this instance checked recently, trusted for a few seconds, and the auth epoch that
makes every instance on the database forget them within a second of a user or token change.

Must not: decide roles or validate tokens (store/users.py does); it only remembers answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from evacore.logs import get_logger
from evacore.store import direct
from evacore.store.lean import transact
from evacore.store.tables import Setting
from evacore.ticks import sleep_to_next

if TYPE_CHECKING:
    from evacore.store.db import Database

log = get_logger(__name__)

EPOCH_KEY = "auth_epoch"
"""The settings row bumped by every change of users, roles or tokens."""
REMEMBER_SECONDS = 5.0
"""How long a checked token is taken on trust without reading the database again."""
POLL_SECONDS = 0.25
"""How often an instance that trusts tokens reads the auth epoch: a quarter of the second in
which a change must reach every instance, so a read that began just before the change's commit,
or a loop held up for a moment by a busy host, still leaves the next read inside it."""
_REMEMBER_AT_MOST = 4096


_READ_EPOCH = select(Setting.__table__.c.value).where(Setting.__table__.c.key == EPOCH_KEY)


async def read_epoch(session: AsyncSession) -> int:
    """The auth epoch (pre-built: every trusting instance reads it four times a second)."""
    rows = await direct.execute(session, _READ_EPOCH, {})
    value = rows[0][0] if rows else None
    return int((value or {}).get("v") or 0)


async def bump_epoch(session: AsyncSession) -> None:
    """Record a change of users, roles or tokens (in the caller's transaction)."""
    row = await session.get(Setting, EPOCH_KEY)
    if row is None:
        session.add(Setting(key=EPOCH_KEY, value={"v": 1}))
    else:
        row.value = {"v": int((row.value or {}).get("v") or 0) + 1}
    await session.flush()


class TokenCache:
    """hash -> identity, each trusted for REMEMBER_SECONDS, all forgotten when the epoch moves."""

    def __init__(self, db: Database, *, poll_seconds: float = POLL_SECONDS) -> None:
        self.db = db
        self.poll_seconds = poll_seconds
        self._known: dict[str, tuple[float, Any]] = {}
        self._epoch: int | None = None
        self._task: asyncio.Task[None] | None = None

    def get(self, key: str) -> Any | None:
        hit = self._known.get(key)
        if hit is None or hit[0] <= time.monotonic():
            return None
        return hit[1]

    async def baseline(self, session: AsyncSession) -> None:
        """Before the first token is checked: the epoch that the answers to come rest on, read
        in the same transaction, so a change right after them is still noticed."""
        if self._epoch is None:
            self._epoch = await read_epoch(session)

    def put(self, key: str, identity: Any) -> None:
        if len(self._known) >= _REMEMBER_AT_MOST:
            self._known.clear()
        self._known[key] = (time.monotonic() + REMEMBER_SECONDS, identity)
        self._watch()

    def forget(self, key: str) -> None:
        self._known.pop(key, None)

    def clear(self) -> None:
        self._known.clear()

    def __len__(self) -> int:
        return len(self._known)

    def _watch(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._poll(), name="auth-epoch-watch")

    async def _poll(self) -> None:
        """While anything is trusted, read the epoch; when it moves, trust nothing. Once
        every remembered answer has expired the watch ends, so an idle instance reads
        nothing. The epoch it read last stays the baseline: a change made while it slept
        clears the answers remembered after it at the next watch's first read."""
        while self._known:
            await sleep_to_next(self.poll_seconds)
            now = time.monotonic()
            self._known = {k: hit for k, hit in self._known.items() if hit[0] > now}
            if not self._known:
                return
            try:
                epoch = await transact(self.db, read_epoch)  # lean on SQLite
                if self._epoch is not None and epoch != self._epoch:
                    self._known.clear()
                self._epoch = epoch
            except Exception:
                self._known.clear()
                log.warning("auth.epoch_read_failed", exc_info=True)
        self._epoch = None

    async def aclose(self) -> None:
        self._known.clear()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, RuntimeError):
                await self._task
