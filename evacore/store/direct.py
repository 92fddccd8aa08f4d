"""Pre-built Core statements of the hot path, run on SQLite in one trip to the driver's
thread, inside the caller's session and transaction, without SQLAlchemy's execution layer.

A statement through `AsyncSession.execute` costs about 160 µs of CPU here, of which the
driver's own trip is 70: the rest is the ORM's execute, the greenlet hop and the result
wrapping, paid on every one of a tour's writes and hot reads. The statement is compiled
once per set of parameter names; its parameters pass SQLAlchemy's own bind processors
(JSON, dates, booleans), so what is stored is what `session.execute` would store, and the
columns it returns pass the columns' own result processors (as SQLite describes no column
types, SQLAlchemy asks them with none either), so what is read is what it would read. Two
of them, paid for every date written and every JSON value read, take a shorter way to the
same result on SQLite (`_datetime_writer`, `_json_reader`).

Must not: skip what a statement's own execution would add. A statement with Python-side
column defaults, an expanding IN or a returned column of a TypeDecorator, a write to a table
the recall memory watches (its invalidation hooks `session.execute`), a connection with
statement listeners or echo, and every other database go through `session.execute`
unchanged. Driver errors come out as SQLAlchemy's own exception classes.
"""

from __future__ import annotations

import sqlite3
import weakref
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import exc
from sqlalchemy.dialects.sqlite import DATETIME as SQLITE_DATETIME
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql import ClauseElement
from sqlalchemy.types import JSON, TypeDecorator

from evacore.store import recall
from evacore.store.db import connect_now, loads_json, sqlalchemy_error
from evacore.store.lean import LeanSession
from evacore.store.sqlite_driver import OneTripConnection

_Process = Callable[[Any], Any]
_Rows = Sequence[Sequence[Any]]
_Prepared = tuple[str, tuple[tuple[str | None, Any, _Process | None], ...],
                  "Callable[[_Rows], _Rows] | None"]
"""SQL; for each positional parameter in order: the caller's name for it (None for a value
the statement holds, such as a literal in its WHERE), that value, its processor; and the
reader of the rows it returns when some of its columns have a result processor
(`_row_reader`)."""
_PREPARED: dict[tuple[int, tuple[str, ...]], tuple[ClauseElement, _Prepared | None]] = {}


def _compile(stmt: ClauseElement, keys: tuple[str, ...], dialect: Dialect) -> _Prepared | None:
    if getattr(getattr(stmt, "table", None), "name", None) in recall.TOPICS:
        return None  # recall.py forgets what such a write changes, seen through execute
    try:
        compiled: Any = stmt.compile(dialect=dialect, column_keys=list(keys))
        if compiled.post_compile_params or compiled.literal_execute_params:
            return None  # an expanding IN (or a literal) is rendered per execution
        if compiled.positiontup is None or compiled.insert_prefetch or compiled.update_prefetch:
            return None  # the execution context would compute Python-side defaults
        if any(isinstance(entry[3], TypeDecorator) for entry in compiled._result_columns):
            return None  # its own reading may turn a NULL into something: not direct
        columns = tuple((i, _json_reader(entry[3], dialect, process))
                        for i, entry in enumerate(compiled._result_columns)
                        if entry[3] is not None
                        and (process := entry[3]._cached_result_processor(dialect, None)))
        processors = {name: _datetime_writer(compiled.binds[name].type, dialect, process)
                      for name, process in compiled._bind_processors.items()}
        return compiled.string, tuple(
            (name, None, processors.get(name)) if name in keys
            else (None, compiled.binds[name].effective_value, processors.get(name))
            for name in compiled.positiontup), (
                _row_reader(len(compiled._result_columns), columns) if columns else None)
    except AttributeError:  # a SQLAlchemy whose compiled form reads otherwise: not direct
        return None


def _prepared(stmt: ClauseElement, keys: tuple[str, ...], dialect: Dialect) -> _Prepared | None:
    hit = _PREPARED.get((id(stmt), keys))
    if hit is None or hit[0] is not stmt:
        hit = _PREPARED[(id(stmt), keys)] = (stmt, _compile(stmt, keys, dialect))
    return hit[1]


def _json_reader(type_: Any, dialect: Dialect, process: _Process) -> _Process:
    """A JSON column's reader on SQLite: the engine's deserializer (`loads_json`) begins with
    orjson, so a value orjson reads is read by orjson alone, without SQLAlchemy's two layers
    of wrappers (paid for every JSON value of every history row); anything else (an old
    row's NaN, a number SQLite holds as one) goes through the column's own processor."""
    if (dialect.name != "sqlite" or getattr(dialect, "_json_deserializer", None) is not loads_json
            or not isinstance(type_, JSON)
            or type_._str_impl.result_processor(dialect, None) is not None):
        return process

    def read(value: Any) -> Any:
        # most of a history row's JSON values are empty (a message's images and extra, an
        # answer's steps): made as orjson would make them, without a parse
        if value == "[]":
            return []
        if value == "{}":
            return {}
        try:
            return orjson.loads(value)
        except (TypeError, ValueError):
            return process(value)

    return read


def _datetime_writer(type_: Any, dialect: Dialect, process: _Process) -> _Process:
    """A date-time parameter's writer on SQLite: its default storage format
    (`YYYY-MM-DD HH:MM:SS.ffffff`, the offset left out) is `isoformat`'s text cut before the
    offset, one C call in place of a format filled from a dict of seven fields (paid for
    every date of every write); a `date`, a subclass or another format goes through the
    column's own processor."""
    if dialect.name != "sqlite":
        return process
    impl = type_.dialect_impl(dialect)
    if not isinstance(impl, SQLITE_DATETIME) or \
            impl._storage_format != SQLITE_DATETIME._storage_format:
        return process

    def write(value: Any) -> Any:
        if type(value) is datetime:
            return value.isoformat(" ", "microseconds")[:26]
        return process(value)

    return write


def _direct_driver(sync: Connection) -> OneTripConnection | None:
    if (getattr(sync, "_has_events", True) or getattr(sync.engine, "_has_events", True)
            or getattr(sync, "_echo", True)):
        return None  # someone listens to statements (or an unknown SQLAlchemy): not direct
    driver = sync.connection.driver_connection
    return driver if isinstance(driver, OneTripConnection) else None


def _read(row: Sequence[Any], columns: tuple[tuple[int, _Process], ...]) -> tuple[Any, ...]:
    """A row with its columns' result processors applied (a NULL stays NULL, as every
    built-in type reads it)."""
    values = list(row)
    for i, process in columns:
        value = values[i]
        if value is not None:
            values[i] = process(value)
    return tuple(values)


def _row_reader(width: int, columns: tuple[tuple[int, _Process], ...]
                ) -> Callable[[_Rows], _Rows]:
    """`_read` for every row of a statement's result, written out once for its columns (a
    long chat's history is hundreds of rows a tour): one comprehension that unpacks each row
    and calls the processors of its processed columns in place, with no call or loop per row.
    A row of another width than the statement's (not expected) takes `_read`."""
    processed = dict(columns)
    names = [f"c{i}" for i in range(width)]
    values = [f"None if {name} is None else p{i}({name})" if i in processed else name
              for i, name in enumerate(names)]
    source = (f"def read(rows):\n"
              f"    return [({', '.join(values)},) for ({', '.join(names)},) in rows]\n")
    namespace: dict[str, Any] = {f"p{i}": process for i, process in columns}
    exec(source, namespace)  # noqa: S102 - the source holds column positions only
    unpacked: Callable[[_Rows], _Rows] = namespace["read"]

    def read(rows: _Rows) -> _Rows:
        if rows and len(rows[0]) != width:
            return [_read(row, columns) for row in rows]
        return unpacked(rows)

    return read


_CONNECTION = "evacore.direct.connection"
"""The `session.info` key of the transaction this session's last direct statement ran in
(a weak reference: the transaction refers to its session, and a cycle would leave every
ended session to the garbage collector's full passes) and its connection: the next
statement of the same transaction takes the connection from there instead of asking the
session again (its `connection()` is a greenlet hop)."""


async def _sqlite_connection(session: AsyncSession) -> Connection | None:
    """The connection of the session's transaction when its database is SQLite, else None."""
    held = session.info.get(_CONNECTION)
    if held is not None:
        transaction_ref, sync = held
        transaction = transaction_ref()
        if (transaction is not None and transaction is session.sync_session.get_transaction()
                and transaction.is_active):
            return sync  # type: ignore[no-any-return]
    bind = session.sync_session.bind
    if bind is None or bind.dialect.name != "sqlite":
        return None
    sync = connect_now(session.sync_session) or (await session.connection()).sync_connection
    transaction = session.sync_session.get_transaction()
    if transaction is not None:
        session.info[_CONNECTION] = (weakref.ref(transaction), sync)
    return sync


async def execute(session: AsyncSession | LeanSession, stmt: ClauseElement,
                  params: dict[str, Any]) -> Sequence[Sequence[Any]]:
    """Run `stmt` (built once, at import) with `params` in the session's transaction; the
    rows it returns (a `SELECT`'s, a `RETURNING`'s) as tuples, none for a plain write. On a
    `LeanSession` (`store/lean.py`) a statement not run here goes to the ordinary session it
    opens on the same connection."""
    if type(session) is LeanSession:
        prepared = _prepared(stmt, tuple(params), session.dialect)
        if prepared is not None:
            return await _run(session.driver, prepared, params)
    else:
        sync = await _sqlite_connection(session)
        if sync is not None:
            driver = _direct_driver(sync)
            prepared = _prepared(stmt, tuple(params), sync.dialect) if driver else None
            if driver is not None and prepared is not None:
                return await _run(driver, prepared, params)
    result = await session.execute(stmt, params)
    try:
        return result.all()
    except exc.ResourceClosedError:  # a write that returns nothing (an ORM entity's too)
        return ()


async def _run(driver: OneTripConnection, prepared: _Prepared, params: dict[str, Any]
               ) -> Sequence[Sequence[Any]]:
    sql, slots, reader = prepared
    args = tuple([(held if name is None else params[name]) if process is None
                  else process(held if name is None else params[name])
                  for name, held, process in slots])
    try:
        rows = await driver.run(sql, args)
    except sqlite3.DatabaseError as e:
        raise sqlalchemy_error(e, sql, args) from e
    return rows if reader is None else reader(rows)
