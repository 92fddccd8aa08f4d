"""An aiosqlite connection whose cursors run each statement in one trip to the worker thread.

aiosqlite runs every call on its own thread, and SQLAlchemy's adapter makes four calls per
statement (open a cursor, execute, fetch all rows, close), each a round trip through a queue
and the event loop's wake-up pipe: about 70 µs of CPU apiece, which made the thread hops
the largest cost of a generate request. The cursor here opens, executes, fetches and closes
in a single call and answers the rest from what that call returned.

Must not: change what a statement does. It only batches aiosqlite's calls; transactions,
commits and the connection's thread stay aiosqlite's own.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable
from typing import Any, Self

import aiosqlite


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
        conn = self._connection._conn
        self.description, self.rowcount, self.lastrowid, self._rows = \
            await self._connection._execute(_run, conn, sql, parameters, many)

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
    """aiosqlite's connection with one-trip cursors; a commit or rollback with no open
    transaction (a read-only session, the pool's reset on return) skips the thread trip."""

    def cursor(self) -> OneTripCursor:  # type: ignore[override]
        return OneTripCursor(self)

    async def run(self, sql: str, parameters: tuple[Any, ...]) -> list[Any]:
        """One statement in one trip (`store/direct.py`): the rows it returns."""
        return (await self._execute(_run, self._conn, sql, parameters, False))[3]  # type: ignore[no-any-return]

    async def commit(self) -> None:
        if self._connection is not None and not self._connection.in_transaction:
            return
        await super().commit()

    async def rollback(self) -> None:
        if self._connection is not None and not self._connection.in_transaction:
            return
        await super().rollback()


def async_creator(database: str, **kwargs: Any) -> Callable[[], Any]:
    """An `async_creator` for SQLAlchemy's aiosqlite dialect opening `database` this way."""

    async def connect() -> OneTripConnection:
        conn = OneTripConnection(lambda: sqlite3.connect(database, **kwargs), 64)
        conn._thread.daemon = True  # as SQLAlchemy does for aiosqlite's own connections
        return await conn

    return connect
