"""The read session the prompt-building stages of a tour share (stages 2-5): one session, and
one connection from the pool, for what they read, instead of a session of their own each.

Opening and ending a session costs more than the few statements such a stage runs (about
250 µs of CPU against 30 for one statement on SQLite): a tour that reads its history,
settings, lorebook links and memory blocks in one session saves most of that three times.

Must not: write (a stage that writes opens its own `core.session()`, committed on its own),
or hold the connection while a stage waits on anything but the database: `end_reads` is
called before such a wait (retrieval's embedding) and after the last prompt-building stage.
A failure inside `reads` ends the session, so the next stage reads in a fresh one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from sqlalchemy.ext.asyncio import AsyncSession

from evacore.store.db import close_session

if TYPE_CHECKING:
    from evacore.core import Core
    from evacore.pipeline.tour import Tour

_KEY = "_reads_session"
"""Where the open session is kept, in `tour.data` (popped, never returned by the API)."""


@asynccontextmanager
async def reads(core: Core, tour: Tour) -> AsyncIterator[AsyncSession]:
    """The tour's read session, opened on first use and kept open for the next stage."""
    session: AsyncSession | None = tour.data.get(_KEY)
    if session is None:
        session = tour.data[_KEY] = core.db.sessions()
    try:
        yield session
    except BaseException:
        await end_reads(tour)
        raise


async def end_reads(tour: Tour) -> None:
    """End the tour's read session, if one is open (its transaction rolled back: it only
    read). Safe to call at any point, more than once, and from a cancelled task."""
    session: AsyncSession | None = tour.data.pop(_KEY, None)
    if session is not None:
        await close_session(session)
