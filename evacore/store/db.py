"""Database engine and sessions for SQLite (WAL, busy timeout) and PostgreSQL (asyncpg).

Must not: define tables (tables.py) or run queries beyond connection setup.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import weakref
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import event, exc
from sqlalchemy.dialects.sqlite.aiosqlite import dialect as aiosqlite_dialect
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.orm import Session
from sqlalchemy.util.concurrency import greenlet_spawn

from evacore.eager import run_until_wait
from evacore.store.sqlite_driver import Checkpointer, async_creator


def is_sqlite(url: str) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


SQLITE_CACHE_KIB = 128
"""The page cache of each SQLite connection (SQLite's default is 2,000 KiB). A pool's
connections fill their caches as the database grows, and the pool keeps SQLITE_POOL_SIZE of
them: at the default an instance under load grew by about a megabyte a second until they
held 64 MB between them. In WAL mode a connection's cache is emptied whenever another one
writes, so under load it seldom outlives a tour; what a tour reads again comes from the
operating system's file cache, a system call a page (a one-token tour ran 2.5 % more
instructions: 7.41 M against 7.23 M in the instructions benchmark)."""


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=10000")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute(f"PRAGMA cache_size=-{SQLITE_CACHE_KIB}")
    cur.close()


def dumps_json(value: Any) -> str:
    """JSON columns through orjson (several times faster than the standard library on a
    tour's diagnostics); what orjson refuses (an integer past 64 bits) takes the slow road."""
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return json.dumps(value)


def loads_json(text: str | bytes) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)  # NaN / Infinity written by an older release


SQLITE_POOL_SIZE = 32
"""SQLite connections of one process, all kept once opened and none opened beyond: under
load a tour waiting for its turn to write holds its connection, and a connection opened and
closed for each busy moment (a thread and four pragmas each time) costs more than one kept.
The pool hands out the connection returned last (`pool_use_lifo`)."""


def create_engine(url: str, **kwargs: Any) -> AsyncEngine:
    """An async engine; SQLite gets WAL, a busy timeout and foreign keys on every connection."""
    kwargs.setdefault("json_serializer", dumps_json)
    kwargs.setdefault("json_deserializer", loads_json)
    if is_sqlite(url):
        database = make_url(url).database
        if database and database != ":memory:":
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        args, params = aiosqlite_dialect().create_connect_args(make_url(url))
        kwargs.setdefault("pool_size", SQLITE_POOL_SIZE)
        kwargs.setdefault("max_overflow", 0)
        # the connection used last goes out first: its page cache is still current when
        # no other connection wrote since (in WAL mode a write by another one empties it),
        # so a tour after a tour reads its pages from memory, not with a system call each
        kwargs.setdefault("pool_use_lifo", True)
        creator = async_creator(*args, **{**params, "timeout": 10})
        engine = create_async_engine(url, async_creator=creator, **kwargs)
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        _CHECKPOINTERS[engine.sync_engine] = creator.checkpointer
        return engine
    kwargs.setdefault("pool_size", 10)
    kwargs.setdefault("max_overflow", 20)
    kwargs.setdefault("pool_pre_ping", True)
    return create_async_engine(url, **kwargs)


_CHECKPOINTERS: weakref.WeakKeyDictionary[Engine, Checkpointer] = weakref.WeakKeyDictionary()
"""The WAL checkpointer of each SQLite engine `create_engine` made. (Not an engine event:
any engine event listener takes every statement off `store/direct.py`'s path.)"""


async def dispose_engine(engine: AsyncEngine) -> None:
    """Close the engine's connections, then its WAL checkpointer's (SQLite): the last
    connection to close copies the WAL into the database file and removes it, so the file
    alone holds every commit once the server has stopped."""
    await engine.dispose()
    checkpointer = _CHECKPOINTERS.get(engine.sync_engine)
    if checkpointer is not None:
        await asyncio.to_thread(checkpointer.close)


def make_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(engine, expire_on_commit=False)


class Database:
    """One database: its engine and a session factory; what services below the core hold."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.sessions = make_sessionmaker(engine)

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @asynccontextmanager
    async def session(self) -> AsyncIterator[AsyncSession]:
        """A session in one transaction: committed on success, rolled back on error.

        The same as `async with session.begin()` followed by `close_session`, in fewer hops
        into SQLAlchemy's greenlets (each about 10 µs of CPU, several per session): the
        transaction begins without one (beginning takes no connection yet), and the commit
        and the close, which after a commit holds no connection, share one."""
        s = self.sessions()
        s.sync_session.begin()
        try:
            yield s
            await greenlet_spawn(_commit_and_close, s.sync_session)
        except BaseException:
            await close_session(s)  # the rollback of a block or a commit that failed
            raise


def _commit_and_close(session: Session) -> None:
    session.commit()
    session.close()


_NUL_REFUSALS = ("0x00", "\\u0000 cannot be converted", "unsupported unicode escape sequence")
"""How PostgreSQL says a text or JSON value held a NUL character (U+0000), which it cannot
store (SQLite can)."""


def refuses_nul(error: BaseException) -> bool:
    """Whether the database refused a statement for a NUL character in one of its values:
    bad input, not a fault of the server."""
    return isinstance(error, exc.DBAPIError) and any(
        mark in str(error.orig).lower() for mark in _NUL_REFUSALS)


def connect_now(session: Session) -> Connection | None:
    """The connection of `session`'s transaction on SQLite, taken without a hop into a
    greenlet while the pool has an idle connection: handing it out needs no I/O there (no
    pre-ping), nor does returning the one the transaction already holds. None otherwise (no
    idle connection, one that must be reopened, another database): the caller then awaits
    `AsyncSession.connection`, which finds or opens it."""
    bind = session.bind
    if (not isinstance(bind, Engine) or bind.dialect.name != "sqlite"
            or bind.pool.checkedin() == 0):
        return None
    try:
        return session.connection()
    except exc.MissingGreenlet:  # the idle connection was invalidated: it must be reopened
        return None


async def close_session(session: AsyncSession) -> None:
    """Close `session` to its end even if the caller is cancelled meanwhile, without a pass of
    the event loop when closing waits for nothing (the usual case: its transaction has ended
    and its connection is back in the pool).

    SQLAlchemy's own `async with` runs the close in a task of its own so that a cancel cannot
    abandon it halfway; that task costs three passes of the loop even when the close waits
    for nothing, and under load every pass first runs the ready work of every other request.
    Here the close starts in the caller's task (`finish_uncancelled`)."""
    await finish_uncancelled(session.close())


async def finish_uncancelled(coro: Coroutine[Any, Any, Any]) -> None:
    """Run `coro` (a close, a rollback) to its end even if the caller is cancelled meanwhile:
    it starts in the caller's task (`evacore.eager`), and only when it has to wait (a
    rollback over the network or on the driver's thread) does a task of its own finish it,
    the caller waiting for that task shielded (a cancel is raised once it is done)."""
    rest = run_until_wait(coro)
    if rest is None:
        return
    task = asyncio.ensure_future(rest)
    cancelled: asyncio.CancelledError | None = None
    while True:
        try:
            await asyncio.shield(task)
            break
        except asyncio.CancelledError as err:
            if task.done():
                raise
            cancelled = err
    if cancelled is not None:
        raise cancelled


_ERRORS = ((sqlite3.IntegrityError, exc.IntegrityError),
           (sqlite3.OperationalError, exc.OperationalError),
           (sqlite3.DatabaseError, exc.DatabaseError))


def sqlalchemy_error(error: sqlite3.DatabaseError, sql: str, args: Any) -> exc.DBAPIError:
    """A driver's error as SQLAlchemy raises it for the same statement."""
    ours = next(mine for theirs, mine in _ERRORS if isinstance(error, theirs))
    return ours(sql, args, error)  # type: ignore[no-any-return]
