"""A tour's transactions on SQLite without SQLAlchemy's Session until one is needed: one
pooled connection, the statements of `store/direct.py` run on its driver, one commit.

Opening, committing and closing a session costs about 130 µs of CPU here (its state
machine, the engine connection around the pooled one, the pool's check-out and check-in,
two greenlet hops), about ten times what a statement costs on the driver; a tour opened
three (its start, its reads, its save). A `LeanSession` takes an idle pooled connection
when the database is SQLite and nothing listens to its statements; `direct.execute` runs
statements on that connection's driver, which takes the write gate, commits and rolls
back as it does under a session. Asked for anything else (an ORM query, a statement
`direct` does not run, an event listener on its session), it opens an ordinary session on
the same connection, in the same transaction, and answers from it from then on: nothing
the work did is run twice, and everything commits or rolls back together.

Must not: change what is stored or read (the statements are `direct.execute`'s, run by the
same driver on the same connection an ordinary session would use), give a connection back
to the pool with its transaction open, or let a cancel leave the write gate taken (the
rollback is finished shielded). Every other database goes through `Database.session`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from sqlalchemy import exc
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession
from sqlalchemy.util.concurrency import greenlet_spawn

from evacore.store.db import Database, finish_uncancelled, sqlalchemy_error
from evacore.store.sqlite_driver import OneTripConnection

T = TypeVar("T")


class LeanSession:
    """Stands in for an `AsyncSession`: `bind`, `get_bind()` and `info` answer as a
    session's do and `direct.execute` runs statements on `driver`; any other attribute is
    the ordinary session's, opened on first use on the same connection (`_session`)."""

    __slots__ = ("_engine", "_fairy", "_info", "_opened", "bind", "dialect", "driver")

    def __init__(self, bind: AsyncEngine, fairy: Any, driver: OneTripConnection) -> None:
        self.bind = bind
        self._engine = bind.sync_engine
        self.dialect = self._engine.dialect
        self._fairy = fairy
        self.driver = driver
        self._info: dict[Any, Any] = {}
        self._opened: AsyncSession | None = None

    @property
    def info(self) -> dict[Any, Any]:
        return self._info if self._opened is None else self._opened.info

    def get_bind(self, *_args: Any, **_kwargs: Any) -> Any:
        return self._engine

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session(), name)

    def _session(self) -> AsyncSession:
        """The ordinary session this one becomes: on the same pooled connection (which its
        engine connection now holds and gives back), its transaction the same."""
        opened = self._opened
        if opened is None:
            connection = AsyncConnection(self.bind, Connection(self._engine, self._fairy))
            opened = self._opened = AsyncSession(bind=connection, expire_on_commit=False)
            opened.info.update(self._info)
        return opened

    async def end(self, commit: bool = False) -> None:
        """Commit (`commit`) or roll back what the work did, then give the connection back
        (and close the ordinary session, if one was opened). A failed commit is rolled back
        and raised as SQLAlchemy raises it."""
        opened = self._opened
        try:
            if commit:
                if opened is not None:
                    await opened.flush()  # the ORM's pending writes, on the same connection
                try:
                    await self.driver.commit()
                except sqlite3.DatabaseError as e:
                    raise sqlalchemy_error(e, "COMMIT", ()) from e
                if opened is not None:
                    await opened.commit()  # its own end and listeners: nothing is left to write
        finally:
            await (self._release() if opened is None else self._close(opened))

    async def close(self) -> None:
        """`end` without a commit (a read session's end, as `AsyncSession.close`)."""
        await self.end()

    async def _release(self) -> None:
        driver, fairy = self.driver, self._fairy
        try:
            if driver.transaction_open():
                await finish_uncancelled(driver.rollback())
        except Exception:  # the connection is broken: the pool opens another
            await finish_uncancelled(greenlet_spawn(fairy.invalidate))
            raise
        finally:
            fairy._checkin(transaction_was_reset=True)

    @staticmethod
    async def _close(opened: AsyncSession) -> None:
        connection = opened.bind
        try:
            await finish_uncancelled(opened.close())
        finally:
            # the engine connection rolls back what is still open and gives the pooled one back
            await finish_uncancelled(connection.close())


def take(db: Database) -> LeanSession | None:
    """A lean session on an idle pooled connection of `db`, without waiting; None when the
    database is not SQLite, something listens to its statements, or no connection is idle
    (or the idle one must be opened again): the caller then uses an ordinary session."""
    engine = db.engine.sync_engine
    if (engine.dialect.name != "sqlite" or getattr(engine, "_has_events", True)
            or getattr(engine, "_echo", True) or engine.pool.checkedin() == 0):
        return None
    try:
        fairy = engine.pool.connect()
    except exc.MissingGreenlet:  # the idle connection was invalidated: it must be reopened
        return None
    driver = fairy.driver_connection
    if not isinstance(driver, OneTripConnection):
        fairy._checkin(transaction_was_reset=True)
        return None
    return LeanSession(db.engine, fairy, driver)


async def transact(db: Database, work: Callable[[Any], Awaitable[T]]) -> T:
    """`work(session)` in one transaction, committed when it returns and rolled back when it
    raises: on a `LeanSession` when `take` gives one, else in `db.session()`."""
    lean = take(db)
    if lean is None:
        async with db.session() as s:
            return await work(s)
    try:
        result = await work(lean)
    except BaseException:
        await lean.end()
        raise
    await lean.end(commit=True)
    return result
