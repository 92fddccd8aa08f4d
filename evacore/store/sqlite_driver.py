"""An aiosqlite connection whose cursors run each statement in one trip to the worker thread,
or on the event loop itself when the statement cannot wait.

aiosqlite runs every call on its own thread, and SQLAlchemy's adapter makes four calls per
statement (open a cursor, execute, fetch all rows, close), each a round trip through a queue
and the event loop's wake-up pipe: about 70 µs of CPU apiece, which made the thread hops
the largest cost of a generate request. The cursor here opens, executes, fetches and closes
in a single call and answers the rest from what that call returned.

Even one trip (about 80 µs of CPU here, both threads counted) costs more than the
statements of a tour take to run (a few µs each on a small chat), and under load the worker
waits for the interpreter's lock behind the event loop. So a statement that does not wait on
a lock runs inline, on the loop's thread: a `SELECT` (in WAL mode a reader never waits for a
writer), any statement of a transaction that already wrote (it holds the write lock), and,
in WAL mode, its commit. The first write of a transaction may have to wait for another
writer, who may need the loop to finish: it is tried inline with the busy timeout at zero
and, when another writer holds the lock, undone and sent to the thread to wait there. (In WAL
mode the busy timeout stays at zero on the loop from a connection's first write on, and each
call on the thread runs with it restored: a read on the loop that meets a lock goes to the
thread too, instead of sleeping on the loop.) Every
`CHECKPOINT_EVERY`th commit starts a checkpoint of the WAL on a thread and connection of its
own (`Checkpointer`), so a commit on the loop never copies the WAL into the database and no
writer waits for the copy. `executemany`, rollbacks, a statement seen using more than
`INLINE_SECONDS` of the loop's CPU (for its next runs, more of them each time it is seen so
again), and the next statement once `INLINE_RUN_SECONDS` of them ran inline in a row (the
loop running nothing else between them) go to the thread, and so does everything while a
call of this connection is there.

SQLite lets one transaction write at a time; a writer that finds the lock taken sleeps in
SQLite's busy handler, waking at growing intervals (up to 100 ms) to try again, and may lose
every race to writers that try at the right moment until its busy timeout runs out ("database
is locked"). So the connections of one database in this process take turns through a
`WriteGate` first: the first write of a transaction waits for the gate on the event loop, in
arrival order, is woken the moment the holder's transaction ends, and holds it until its own
ends; a transaction run inline ends before the loop runs anything else, so a queue behind a
holder that had to wait drains in one pass of the loop. Writers of other processes still
meet SQLite's busy handler, and a gate not given within the busy timeout is not waited for
further: the statement then meets the lock as it would without the gate.

Must not: change what a statement does. It only batches aiosqlite's calls and chooses the
thread they run on; transactions and commits stay aiosqlite's own.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, Self

import aiosqlite

INLINE_SECONDS = 0.002
"""A statement that used more CPU than this on the event loop runs on the thread for its next
`SLOW_RUNS` runs, twice as many each time it is seen so again (up to `SLOW_RUNS_MAX`; half
as many after a quick run on the loop): one slow by nature (a full-text search over a large
index, a big delete) is back on the loop once in thousands of runs, one slowed once (a
full-text index merging its segments) after a few. Only the statement's own CPU counts:
time the loop's thread was not running (the CPU given to another thread or process) is not
the statement's cost. A statement that holds the write gate and goes to the thread keeps
every other writer waiting for the loop to come round: it is sent there only when it has
to be."""
SLOW_RUNS = 2
SLOW_RUNS_MAX = 4096
INLINE_RUN_SECONDS = 0.005
"""Inline statements of one connection since its last trip to the thread, past this much
time, send the next one to the thread: a long run of quick statements (a big transaction)
still lets the loop serve other tasks every few milliseconds."""
CHECKPOINT_EVERY = 32
"""Commits to one database between two checkpoints of its WAL, each started by the commit
that reaches the count and run by a `Checkpointer` on a thread of its own. A commit never
copies the WAL into the database: SQLite's own automatic checkpoint, which a commit runs
once the WAL holds 1000 pages, is left as a safety net these keep it from reaching."""
CHECKPOINTER_IDLE_SECONDS = 10.0
"""How long a `Checkpointer` keeps its thread and connection with no checkpoint to run."""
CLOSE_WAIT_SECONDS = 5.0
"""How long closing a `Checkpointer` waits for a checkpoint under way to finish."""
_SLOW: dict[str, list[int]] = {}
"""Statements seen slow on the loop: [runs on the thread owed after the last slow one, runs
still owed]."""
_SLOW_LIMIT = 4096


def _reads(sql: str) -> bool:
    return _kind(sql) == "SELECT"


def _writes_row(sql: str) -> bool:
    """An INSERT, UPDATE, DELETE or REPLACE: the statements that open a transaction."""
    return _kind(sql) in ("INSERT", "UPDATE", "DELETE", "REPLAC")


def _kind(sql: str) -> str:
    """The statement's first word (its first six letters, upper case), read once per text:
    a tour's statements are the same few texts every time."""
    kind = _KINDS.get(sql)
    if kind is None:
        if len(_KINDS) >= _KINDS_LIMIT:
            _KINDS.clear()
        kind = _KINDS[sql] = sql.lstrip()[:6].upper()
    return kind


_KINDS: dict[str, str] = {}
_KINDS_LIMIT = 4096


def _busy(error: sqlite3.OperationalError) -> bool:
    return (getattr(error, "sqlite_errorcode", 0) & 0xFF) == sqlite3.SQLITE_BUSY


def _slow(sql: str) -> None:
    """`sql` used more than `INLINE_SECONDS` of the loop's CPU: its next runs go to the
    thread, twice as many as the last time it was slow."""
    entry = _SLOW.get(sql)
    if entry is None:
        if len(_SLOW) >= _SLOW_LIMIT:
            _SLOW.clear()
        _SLOW[sql] = [SLOW_RUNS, SLOW_RUNS]
    else:
        entry[0] = entry[1] = min(entry[0] * 2, SLOW_RUNS_MAX)


def _fast(sql: str) -> None:
    """`sql` ran quickly on the loop: if it was slow before, it owes half as many runs to
    the thread the next time it is slow (a slow one now and then stays a short penalty)."""
    entry = _SLOW.get(sql)
    if entry is not None:
        entry[0] = max(SLOW_RUNS // 2, entry[0] // 2)


def _owed_to_thread(sql: str) -> bool:
    """Whether this run of `sql` goes to the thread for having been slow (and counts it)."""
    entry = _SLOW.get(sql)
    if entry is None or entry[1] <= 0:
        return False
    entry[1] -= 1
    return True


def checkpoint(conn: sqlite3.Connection) -> tuple[int, int, int]:
    """A PASSIVE checkpoint: (busy, frames in the WAL, frames copied into the database). It
    waits for no reader or writer: frames they still need are left for the next one."""
    return tuple(conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone())  # type: ignore[return-value]


class Checkpointer:
    """Copies one database's WAL into it every `CHECKPOINT_EVERY` commits, with a connection
    of its own on a thread of its own, so no commit and no holder of the write gate waits
    for it; one at a time (a count reached while one runs is left to the next).

    The thread and its connection are kept between checkpoints while commits keep coming
    (opening a connection and starting a thread for each checkpoint cost more than the copy
    itself under load); after `CHECKPOINTER_IDLE_SECONDS` with no checkpoint asked for, the
    connection is closed and the thread ends, and the next count starts them again."""

    def __init__(self, connect: Callable[[], sqlite3.Connection]) -> None:
        self._connect = connect
        self._commits = 0
        self._running = False
        self._lock = threading.Lock()
        self._wanted = threading.Event()
        self._thread: threading.Thread | None = None
        self._closing = False

    def committed(self) -> None:
        """Count a commit; start a checkpoint when the count is reached."""
        self._commits += 1
        if self._commits < CHECKPOINT_EVERY or self._running:
            return
        self._commits = 0
        self._running = True
        with self._lock:
            self._wanted.set()
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._serve, name="evacore-sqlite-checkpoint", daemon=True)
                self._thread.start()

    def close(self) -> None:
        """End the thread and close its connection now (the engine is disposed of): with
        it open, the last of the pool's connections to close would not copy the WAL into
        the database file and remove it, as SQLite's last connection does. A later count
        starts them again."""
        with self._lock:
            thread = self._thread
            if thread is None:
                return
            self._closing = True
            self._wanted.set()
        thread.join(CLOSE_WAIT_SECONDS)

    def _serve(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            while True:
                self._wanted.wait(CHECKPOINTER_IDLE_SECONDS)
                with self._lock:  # idle (nothing asked for since) or closing: end
                    if self._closing or not self._wanted.is_set():
                        self._thread = None
                        self._closing = self._running = False
                        self._wanted.clear()
                        return
                self._wanted.clear()
                try:
                    if conn is None:
                        conn = self._connect()
                    checkpoint(conn)
                except sqlite3.Error:
                    # a database closed or removed meanwhile: nothing to copy; the next
                    # checkpoint opens a connection afresh
                    if conn is not None:
                        conn.close()
                    conn = None
                finally:
                    self._running = False
        finally:
            if conn is not None:
                conn.close()


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


class WriteGate:
    """The turn to write to one database among the connections of this process.

    A writer that finds it free takes it at once; one that finds it held waits in arrival
    order. When the holder gives it back, every waiter is woken in that order, and the
    first to run takes it: a transaction that runs inline never lets the loop run others,
    so it gives the gate back before the next woken waiter runs, and a queue that formed
    behind a holder who had to wait (for the thread) drains in one pass of the loop instead
    of one pass per waiter. A woken waiter that finds the gate taken again waits at the
    head of the queue."""

    def __init__(self) -> None:
        self._held = False
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        """(arrival ticket, future) in arrival order."""
        self._tickets = 0
        self.waits = 0
        """Writers that found the gate held and waited for it."""

    async def take(self, seconds: float) -> bool:
        """Whether the turn was given within `seconds` (when not, the caller goes on
        without it)."""
        if not self._held:
            self._held = True
            return True
        self.waits += 1
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        self._tickets += 1
        ticket = self._tickets
        while True:
            waiter: asyncio.Future[None] = loop.create_future()
            bisect.insort(self._waiters, (ticket, waiter), key=lambda w: w[0])
            expiry = loop.call_at(deadline, _expire, waiter)
            try:
                await waiter
            except TimeoutError:
                self._forget(waiter)
                return False
            except BaseException:
                self._forget(waiter)
                raise
            finally:
                expiry.cancel()
            if not self._held:
                self._held = True
                return True

    def _forget(self, waiter: asyncio.Future[None]) -> None:
        self._waiters = [w for w in self._waiters if w[1] is not waiter]

    def give_back(self) -> None:
        self._held = False
        waiters, self._waiters = self._waiters, []
        for _, waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())


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

    def __init__(self, *args: Any, gate: WriteGate | None = None,
                 checkpointer: Checkpointer | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._gate = gate
        self._checkpointer = checkpointer
        self._holds_gate = False
        """Whether this connection's open transaction holds the database's write gate."""
        self._sent = 0
        """Calls handed to the thread (counted on the loop's thread only)."""
        self._finished = 0
        """Calls the thread has finished (counted on the worker thread only)."""
        self._inline_run = 0.0
        """Seconds of inline statements since the event loop last had control (a trip to
        the thread, or any other wait, lets it run)."""
        self._run_watched = False
        """Whether a callback is queued to end the inline run when the loop next runs."""
        self._busy_ms: int | None = None
        """The connection's busy timeout (read at its first write); None until then."""
        self._busy_zero = False
        """The connection's busy timeout is kept at zero (WAL mode, from its first write on):
        a statement run on the loop never sleeps in SQLite's busy handler, it fails at once
        and goes to the thread, whose calls have `_busy_ms` for their run (two pragmas a
        trip there, none on the loop)."""
        self._wal = False
        """Whether the database is in WAL mode (read with the busy timeout)."""

    def cursor(self) -> OneTripCursor:  # type: ignore[override]
        return OneTripCursor(self)

    async def run(self, sql: str, parameters: tuple[Any, ...]) -> list[Any]:
        """One statement in one trip (`store/direct.py`): the rows it returns."""
        return (await self._trip(sql, parameters, False))[3]  # type: ignore[no-any-return]

    async def _trip(self, sql: str, parameters: Any, many: bool) -> tuple[Any, ...]:
        if self._gate is not None and _writes_row(sql):
            await self._take_gate()
        conn = self._connection
        if (conn is not None and self._running and not many and self._finished == self._sent
                and self._inline_run < INLINE_RUN_SECONDS and not _owed_to_thread(sql)):
            if conn.in_transaction or _reads(sql):
                try:
                    return self._inline(conn, sql, parameters)
                except sqlite3.OperationalError as e:
                    if not (self._busy_zero and _busy(e)):
                        raise
                # locked with the loop's zero busy timeout (a database being recovered): the
                # thread, below, waits for it as long as the busy timeout allows
            elif _writes_row(sql):
                done = self._first_write(conn, sql, parameters)
                if done is not None:
                    return done
        return await self._execute(_run, self._conn, sql, parameters, many)  # type: ignore[no-any-return]

    def _inline(self, conn: sqlite3.Connection, sql: str, parameters: Any) -> tuple[Any, ...]:
        started, cpu = time.perf_counter(), time.thread_time()
        try:
            return _run(conn, sql, parameters, False)
        finally:
            took = time.perf_counter() - started
            self._ran_inline(took)
            # its CPU is at most its wall time: the thread's CPU clock (a system call, where
            # the wall clock is not) is read again only when the wall time could hold more
            if took > INLINE_SECONDS and time.thread_time() - cpu > INLINE_SECONDS:
                _slow(sql)
            elif _SLOW:
                _fast(sql)

    def _ran_inline(self, seconds: float) -> None:
        """Count inline time toward the run, which ends once the loop runs other work."""
        self._inline_run += seconds
        if not self._run_watched:
            self._run_watched = True
            asyncio.get_running_loop().call_soon(self._end_run)

    def _end_run(self) -> None:
        self._run_watched = False
        self._inline_run = 0.0

    def _first_write(self, conn: sqlite3.Connection, sql: str, parameters: Any
                     ) -> tuple[Any, ...] | None:
        """The first write of a transaction, on the loop, when no other writer holds the
        database (WAL mode only): with the busy timeout at zero a held lock fails at once
        instead of waiting for a holder that may need the loop. Then the transaction, which
        holds nothing but that failed statement, is rolled back and None says: send the
        statement to the thread, where it waits as long as the busy timeout allows."""
        if self._busy_ms is None:
            self._wal = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal"
            self._busy_ms = int(conn.execute("PRAGMA busy_timeout").fetchone()[0])
            if self._wal:
                conn.execute("PRAGMA busy_timeout = 0")
                self._busy_zero = True
        if not self._wal:
            return None
        try:
            return self._inline(conn, sql, parameters)
        except sqlite3.OperationalError as e:
            if not _busy(e):
                raise
            if conn.in_transaction:
                conn.rollback()
            return None

    async def _take_gate(self) -> None:
        """The write gate, before a write of a transaction that holds it not yet; kept while
        the transaction is open. One that ended (or never began) gives it back first."""
        assert self._gate is not None
        self._give_back_if_ended()
        if self._holds_gate:
            return
        seconds = (self._busy_ms if self._busy_ms is not None else 10_000) / 1000
        self._holds_gate = await self._gate.take(seconds)

    def _give_back_gate(self) -> None:
        if self._holds_gate:
            self._holds_gate = False
            assert self._gate is not None
            self._gate.give_back()

    def _give_back_if_ended(self) -> None:
        """The gate goes back unless a transaction is still open (a commit that failed
        leaves it open, to be rolled back: the gate goes with that)."""
        if self._connection is None or self._nothing_to_end():
            self._give_back_gate()

    async def _execute(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """aiosqlite's trip to the thread, counted: while one is there (even one whose
        caller was cancelled), nothing of this connection runs inline."""
        busy = self._busy_ms if self._busy_zero else None

        def counted() -> Any:
            try:
                if busy is None:
                    return fn(*args, **kwargs)
                conn = self._conn
                conn.execute(f"PRAGMA busy_timeout = {busy}")
                try:
                    return fn(*args, **kwargs)
                finally:
                    with contextlib.suppress(sqlite3.ProgrammingError):  # the call closed it
                        conn.execute("PRAGMA busy_timeout = 0")
            finally:
                self._finished += 1

        if not self._running or not self._connection:
            raise ValueError("Connection closed")  # as aiosqlite says it, before counting
        self._sent += 1
        self._inline_run = 0.0
        return await super()._execute(counted)

    def transaction_open(self) -> bool:
        """A transaction is open, or a call still on the thread may yet open one: a commit or
        rollback has something to end."""
        return not self._nothing_to_end()

    def _nothing_to_end(self) -> bool:
        """No transaction is open, and no call still on the thread (one whose caller was
        cancelled) may yet open one: a commit or rollback would have nothing to do."""
        conn = self._connection
        return conn is not None and not conn.in_transaction and self._finished == self._sent

    async def commit(self) -> None:
        """On the loop in WAL mode when nothing of this connection is on the thread (a
        commit there waits for no lock), counted toward the next checkpoint. The write gate
        goes back once the transaction has ended."""
        try:
            if self._nothing_to_end():
                return
            conn = self._connection
            if self._wal and self._checkpointer is not None:
                self._checkpointer.committed()
            if (self._wal and conn is not None and self._running
                    and self._finished == self._sent and self._inline_run < INLINE_RUN_SECONDS):
                started = time.perf_counter()
                conn.commit()
                self._ran_inline(time.perf_counter() - started)
            else:
                await super().commit()
        finally:
            self._give_back_if_ended()

    async def rollback(self) -> None:
        try:
            if not self._nothing_to_end():
                await super().rollback()
        finally:
            self._give_back_if_ended()

    async def close(self) -> None:
        try:
            await super().close()
        finally:
            self._give_back_gate()


def async_creator(database: str, **kwargs: Any) -> Callable[[], Any]:
    """An `async_creator` for SQLAlchemy's aiosqlite dialect opening `database` this way."""

    gate = WriteGate()
    # inline statements run on the loop's thread, never while the worker runs one
    options = {**kwargs, "check_same_thread": False}

    def open_database() -> sqlite3.Connection:
        return sqlite3.connect(database, **options)

    checkpointer = Checkpointer(open_database)

    async def connect() -> OneTripConnection:
        conn = OneTripConnection(open_database, 64, gate=gate, checkpointer=checkpointer)
        conn._thread.daemon = True  # as SQLAlchemy does for aiosqlite's own connections
        return await conn

    connect.checkpointer = checkpointer  # type: ignore[attr-defined]
    return connect
