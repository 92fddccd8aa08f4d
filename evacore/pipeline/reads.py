"""The read session the prompt-building stages of a tour share (stages 2-5): one session, and
one connection from the pool, for what they read, instead of a session of their own each.

Opening and ending a session costs more than the few statements such a stage runs (about
250 µs of CPU against 30 for one statement on SQLite): a tour that reads its history,
settings, lorebook links and memory blocks in one session saves most of that three times.
On SQLite the session is a `LeanSession` (`store/lean.py`): the pooled connection alone
until a read needs the ORM, which then opens an ordinary session on it.

After the last reading stage the session is ended at the event loop's next pass
(`end_reads_soon`): that pass comes when the tour's task first waits, usually for the
provider's answer to the request it has just sent, so the session's end (about 100 µs of
CPU on SQLite, a round trip on PostgreSQL) is off the way to the first token.

Must not: write (a stage that writes opens its own `core.session()`, committed on its own),
or hold the connection while a stage waits on anything but the database: `end_reads` is
called before such a wait (retrieval's embedding), and a session left to `end_reads_soon`
ends at the first wait of whatever comes next. A failure inside `reads` ends the session,
so the next stage reads in a fresh one.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from sqlalchemy.ext.asyncio import AsyncSession

from evacore.eager import run_until_wait
from evacore.logs import get_logger
from evacore.store.db import close_session
from evacore.store.lean import LeanSession, take

if TYPE_CHECKING:
    from evacore.core import Core
    from evacore.pipeline.tour import Tour

log = get_logger(__name__)

_KEY = "_reads_session"
"""Where the open session is kept, in `tour.data` (popped, never returned by the API)."""


class reads:
    """The tour's read session, opened on first use and kept open for the next stage: a
    `LeanSession` on SQLite (`store/lean.py`), an ordinary one otherwise. A failure inside
    the block ends the session.

    A class rather than a generator-based context manager: four stages enter it every tour,
    and a generator's frame, hooks and wrapper cost several times its own work."""

    __slots__ = ("core", "tour")

    def __init__(self, core: Core, tour: Tour) -> None:
        self.core, self.tour = core, tour

    async def __aenter__(self) -> AsyncSession | LeanSession:
        data = self.tour.data
        session: AsyncSession | LeanSession | None = data.get(_KEY)
        if session is None:
            db = self.core.db
            session = data[_KEY] = take(db) or db.sessions()
        return session

    async def __aexit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if kind is not None:
            await end_reads(self.tour)


async def end_reads(tour: Tour) -> None:
    """End the tour's read session, if one is open (its transaction rolled back: it only
    read). Safe to call at any point, more than once, and from a cancelled task."""
    session: AsyncSession | LeanSession | None = tour.data.pop(_KEY, None)
    if session is not None:
        await close_session(session)


_ENDING: set[asyncio.Task[None]] = set()
"""Ends of sessions that had to wait (a rollback over the network), kept until done."""


def end_reads_soon(tour: Tour) -> None:
    """End the tour's read session, if one is open, at the event loop's next pass: the
    tour's task goes on at once, and nothing reads through the session after this call."""
    session: AsyncSession | LeanSession | None = tour.data.pop(_KEY, None)
    if session is not None:
        asyncio.get_running_loop().call_soon(_end, session)


def _end(session: AsyncSession | LeanSession) -> None:
    try:
        rest = run_until_wait(session.close())
    except Exception:  # the connection is dropped by the pool; the tour is not concerned
        log.warning("reads.close_failed", exc_info=True)
        return
    if rest is not None:
        task = asyncio.ensure_future(rest)
        _ENDING.add(task)
        task.add_done_callback(_ended)


def _ended(task: asyncio.Task[None]) -> None:
    _ENDING.discard(task)
    if not task.cancelled() and task.exception() is not None:
        log.warning("reads.close_failed", exc_info=task.exception())
