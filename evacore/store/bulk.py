"""Many rows into one table, fast: what an import of a long chat writes.

On SQLite the whole database has one writer, so every millisecond of a write transaction
is a millisecond other writers wait. Rows are therefore turned into the driver's values
(JSON text, dates, booleans, through the columns' own bind processors) in a worker thread
first, and then written with one `executemany` per chunk: the write lock is held for
SQLite's own work only. Other databases take plain multi-row inserts in chunks.

Must not: commit, build rows from domain data, or skip a column's own conversion.
"""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import Table, insert
from sqlalchemy.ext.asyncio import AsyncSession

CHUNK = 5000
"""Rows per statement."""


def _driver_values(table: Table, rows: list[dict[str, Any]], dialect: Any
                   ) -> tuple[str, list[tuple[Any, ...]]]:
    columns = list(table.columns)
    processors = [c.type._cached_bind_processor(dialect) for c in columns]
    sql = (f"INSERT INTO {table.name} ({', '.join(c.name for c in columns)}) "
           f"VALUES ({', '.join('?' for _ in columns)})")
    values = []
    for row in rows:
        out = []
        for column, process in zip(columns, processors, strict=True):
            value = row[column.name] if column.name in row else _default(column)
            out.append(process(value) if process is not None and value is not None else value)
        values.append(tuple(out))
    return sql, values


def _default(column: Any) -> Any:
    default = column.default
    if default is None:
        return None
    if default.is_callable:
        return default.arg(None)
    return default.arg


class Prepared:
    """Rows of one table made ready for the driver (`prepare`), written later (`write`)."""

    def __init__(self, table: Table, rows: list[dict[str, Any]], sql: str | None,
                 values: list[tuple[Any, ...]] | None) -> None:
        self.table, self.rows, self.sql, self.values = table, rows, sql, values

    @classmethod
    async def prepare(cls, session: AsyncSession, table: Table, rows: list[dict[str, Any]]
                      ) -> Prepared:
        """Convert the rows (dicts by column name; a missing column takes its default)
        before the transaction writes anything: on SQLite in a worker thread."""
        dialect = session.get_bind().dialect
        if dialect.name != "sqlite" or not rows:
            return cls(table, rows, None, None)
        sql, values = await asyncio.to_thread(_driver_values, table, rows, dialect)
        return cls(table, rows, sql, values)

    async def write(self, session: AsyncSession) -> None:
        """Insert the rows in the session's transaction, a chunk per statement."""
        if self.sql is None or self.values is None:
            for start in range(0, len(self.rows), CHUNK):
                await session.execute(insert(self.table), self.rows[start:start + CHUNK])
            return
        connection = await session.connection()
        for start in range(0, len(self.values), CHUNK):
            await connection.exec_driver_sql(self.sql, self.values[start:start + CHUNK])
