"""An aiosqlite connection whose cursors run each statement in one trip to the worker thread,
or on the event loop itself when the statement cannot wait.

aiosqlite runs every call on its own thread, and SQLAlchemy's adapter makes four calls per
statement (open a cursor, execute, fetch all rows, close), each a round trip through a queue
and the event loop's wake-up pipe: about 70 µs of CPU apiece, which made the thread hops
the largest cost of a generate request. The cursor here opens, executes, fetches and closes
in a single call and answers the rest from what that call returned.

Even one trip costs more than the statements of a tour take to run (a few µs each on a
small chat), and under load the worker waits for the interpreter's lock behind the event
loop. So a statement that cannot wait on a lock runs inline, on the loop's thread: a
`SELECT` (in WAL mode a reader never waits for a writer), or any statement of a transaction
that already wrote (it holds the write lock). The first write of a transaction (it may wait
up to the busy timeout for another writer, who may need the loop to finish), `executemany`,
commits and rollbacks, any statement once seen running longer than `INLINE_SECONDS`, and
the next statement once `INLINE_RUN_SECONDS` of them ran inline in a row still go to the
thread, and so does everything while a call of this connection is there.

Must not: change what a statement does. It only batches aiosqlite's calls and chooses the
thread they run on; transactions and commits stay aiosqlite's own.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterable
from typing import Any, Self

import aiosqlite

INLINE_SECONDS = 0.002
"""A statement that once ran longer than this on the event loop runs on the thread from then
on (a full-text search over a large index, a big delete): the loop never stalls twice."""
INLINE_RUN_SECONDS = 0.005
"""Inline statements of one connection since its last trip to the thread, past this much
time, send the next one to the thread: a long run of quick statements (a big transaction)
still lets the loop serve other tasks every few milliseconds."""
_SLOW: set[str] = set()
_SLOW_LIMIT = 4096


def _reads(sql: str) -> bool:
    return sql.lstrip()[:6].upper() == "SELECT"


def _slow(sql: str) -> None:
    if len(_SLOW) >= _SLOW_LIMIT:
        _SLOW.clear()
    _SLOW.add(sql)


def _run(conn: sqlite3.Connection, sql: str, params: Any, many: bool) -> tuple[Any, ...]:
    cursor = conn.cursor()
    try:
        if many:
            cursor.executemany(sql, params)
        else:
            cursor.execute(sql, params)
        description = cursor.description
        rows = cursor.fetchall() if description else []
        return description, cursor.rowcount, cursor.lastrowid, rows
    finally:
        cursor.close()


class OneTripCursor:
    """The part of aiosqlite's cursor SQLAlchemy uses, one thread trip per execute."""

    arraysize = 1

    def __init__(self, connection: OneTripConnection) -> None:
        self._connection = connection
        self.description: Any = None
        self.rowcount = -1
        self.lastrowid: int | None = None
        self._rows: list[Any] = []

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def execute(self, sql: str, parameters: Any = ()) -> OneTripCursor:
        await self._call(sql, parameters, False)
        return self

    async def executemany(self, sql: str, parameters: Iterable[Any]) -> OneTripCursor:
        await self._call(sql, parameters, True)
        return self

    async def _call(self, sql: str, parameters: Any, many: bool) -> None:
        self.description, self.rowcount, self.lastrowid, self._rows = \
            await self._connection._trip(sql, parameters, many)

    async def fetchall(self) -> list[Any]:
        rows, self._rows = self._rows, []
        return rows

    async def fetchone(self) -> Any:
        return self._rows.pop(0) if self._rows else None

    async def fetchmany(self, size: int | None = None) -> list[Any]:
        size = size or self.arraysize
        rows, self._rows = self._rows[:size], self._rows[size:]
        return rows

    async def close(self) -> None:
        self._rows = []


class OneTripConnection(aiosqlite.Connection):
    """aiosqlite's connection with one-trip cursors and inline statements (see the module);
    a commit or rollback with nothing to end (a read-only session, the pool's reset on
    return, and no call of the connection still on the thread) skips the thread trip."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._sent = 0
        """Calls handed to the thread (counted on the loop's thread only)."""
        self._finished = 0
        """Calls the thread has finished (counted on the worker thread only)."""
        self._inline_run = 0.0
        """Seconds of inline statements since the last trip to the thread."""

    def cursor(self) -> OneTripCursor:  # type: ignore[override]
        return OneTripCursor(self)

    async def run(self, sql: str, parameters: tuple[Any, ...]) -> list[Any]:
        """One statement in one trip (`store/direct.py`): the rows it returns."""
        return (await self._trip(sql, parameters, False))[3]  # type: ignore[no-any-return]

    async def _trip(self, sql: str, parameters: Any, many: bool) -> tuple[Any, ...]:
        conn = self._connection
        if (conn is not None and self._running and not many and self._finished == self._sent
                and self._inline_run < INLINE_RUN_SECONDS and sql not in _SLOW
                and (conn.in_transaction or _reads(sql))):
            started = time.perf_counter()
            try:
                return _run(conn, sql, parameters, False)
            finally:
                took = time.perf_counter() - started
                self._inline_run += took
                if took > INLINE_SECONDS:
                    _slow(sql)
        return await self._execute(_run, self._conn, sql, parameters, many)  # type: ignore[no-any-return]

    async def _execute(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """aiosqlite's trip to the thread, counted: while one is there (even one whose
        caller was cancelled), nothing of this connection runs inline."""
        def counted() -> Any:
            try:
                return fn(*args, **kwargs)
            finally:
                self._finished += 1

        if not self._running or not self._connection:
            raise ValueError("Connection closed")  # as aiosqlite says it, before counting
        self._sent += 1
        self._inline_run = 0.0
        return await super()._execute(counted)

    def _nothing_to_end(self) -> bool:
        """No transaction is open, and no call still on the thread (one whose caller was
        cancelled) may yet open one: a commit or rollback would have nothing to do."""
        conn = self._connection
        return conn is not None and not conn.in_transaction and self._finished == self._sent

    async def commit(self) -> None:
        if not self._nothing_to_end():
            await super().commit()

    async def rollback(self) -> None:
        if not self._nothing_to_end():
            await super().rollback()


def async_creator(database: str, **kwargs: Any) -> Callable[[], Any]:
    """An `async_creator` for SQLAlchemy's aiosqlite dialect opening `database` this way."""

    async def connect() -> OneTripConnection:
        # inline statements run on the loop's thread, never while the worker runs one
        options = {**kwargs, "check_same_thread": False}
        conn = OneTripConnection(lambda: sqlite3.connect(database, **options), 64)
        conn._thread.daemon = True  # as SQLAlchemy does for aiosqlite's own connections
        return await conn

    return connect
