"""The one-trip SQLite cursor (store/sqlite_driver.py) keeps what SQLAlchemy relies on:
row counts, many-row inserts, errors as the driver's own, transactions that commit or roll
back, and concurrent sessions on the one file; and it runs on the event loop's thread only
what cannot wait there."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from typing import Any

import pytest
from sqlalchemy import func, insert, select, text, update
from sqlalchemy.exc import IntegrityError

from evacore.core import Core
from evacore.store import sqlite_driver
from evacore.store.sqlite_driver import OneTripConnection
from evacore.store.tables import Setting


@pytest.fixture
async def sqlite_core(core: Core) -> Core:
    """The core on SQLite, its timed background work (the plugin states' sync every 2 s, the
    heartbeat) stopped: these tests count the statements the driver runs."""
    if core.engine.dialect.name != "sqlite":
        pytest.skip("the SQLite driver only")
    await core.plugins.aclose()
    await core.heartbeat.aclose()
    return core


async def test_the_engine_uses_one_trip_connections(sqlite_core: Core) -> None:
    async with sqlite_core.engine.connect() as conn:
        raw = await conn.get_raw_connection()
        assert isinstance(raw.driver_connection, OneTripConnection)


async def test_row_counts_many_row_inserts_and_reads(sqlite_core: Core) -> None:
    rows = [{"key": f"k{i}", "value": {"v": i}} for i in range(50)]
    async with sqlite_core.session() as s:
        await s.execute(insert(Setting), rows)
        result = await s.execute(update(Setting).where(Setting.key.like("k1%"))
                                 .values(value={"v": -1}))
        assert result.rowcount == 11  # k1, k10..k19
    async with sqlite_core.session() as s:
        assert await s.scalar(select(func.count()).select_from(Setting)
                              .where(Setting.key.like("k%"))) == 50
        values = (await s.execute(select(Setting.key, Setting.value)
                                  .where(Setting.key.in_(["k1", "k2"])).order_by(Setting.key)))
        assert values.all() == [("k1", {"v": -1}), ("k2", {"v": 2})]


async def test_a_failed_statement_raises_and_rolls_back(sqlite_core: Core) -> None:
    with pytest.raises(IntegrityError):
        async with sqlite_core.session() as s:
            s.add(Setting(key="dup", value={"v": 1}))
            await s.flush()
            await s.execute(insert(Setting).values(key="dup", value={"v": 2}))
    async with sqlite_core.session() as s:
        assert await s.get(Setting, "dup") is None  # the first insert went with the rollback
        await s.execute(text("SELECT 1"))  # the connection is usable again


async def test_concurrent_sessions_write_without_losing_rows(sqlite_core: Core) -> None:
    async def writer(n: int) -> None:
        for i in range(10):
            async with sqlite_core.session() as s:
                s.add(Setting(key=f"w{n}-{i}", value={"v": i}))

    await asyncio.gather(*(writer(n) for n in range(8)))
    async with sqlite_core.session() as s:
        assert await s.scalar(select(func.count()).select_from(Setting)
                              .where(Setting.key.like("w%"))) == 80


@pytest.fixture
def unhurried(monkeypatch: pytest.MonkeyPatch) -> None:
    """No statement counts as slow or as a long inline run here: a test about where a
    statement runs is not turned by a machine so busy that one took milliseconds."""
    monkeypatch.setattr(sqlite_driver, "_SLOW", {})
    monkeypatch.setattr(sqlite_driver, "INLINE_SECONDS", 1.0)
    monkeypatch.setattr(sqlite_driver, "INLINE_RUN_SECONDS", 1.0)


@pytest.fixture
def threads_seen(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """(statement, ran on the event loop's thread) for every statement the driver runs."""
    seen: list[tuple[str, bool]] = []
    run = sqlite_driver._run
    loop_thread = threading.get_ident()

    def recorded(conn: Any, sql: str, params: Any, many: bool) -> tuple[Any, ...]:
        seen.append((sql.split()[0].upper(), threading.get_ident() == loop_thread))
        return run(conn, sql, params, many)

    monkeypatch.setattr(sqlite_driver, "_run", recorded)
    monkeypatch.setattr(sqlite_driver, "_SLOW", {})
    return seen


async def test_with_no_other_writer_every_statement_runs_inline(
        sqlite_core: Core, threads_seen: list[tuple[str, bool]], unhurried: None) -> None:
    async with sqlite_core.session() as s:
        await s.execute(select(Setting.key).where(Setting.key == "nothing"))
        await s.execute(insert(Setting).values(key="a", value={"v": 1}))
        await s.execute(insert(Setting).values(key="b", value={"v": 2}))
        await s.execute(select(Setting.key))
    assert threads_seen == [("SELECT", True), ("INSERT", True), ("INSERT", True),
                            ("SELECT", True)]
    async with sqlite_core.session() as s:
        assert sorted(await s.scalars(select(Setting.key).where(Setting.key.in_(["a", "b"])))) == ["a", "b"]


async def _count_x(core: Core) -> None:
    async with core.session() as s:
        assert await s.scalar(select(func.count()).select_from(Setting).where(Setting.key == "x")) == 0


async def test_a_statement_seen_slow_runs_on_the_thread_longer_each_time(
        sqlite_core: Core, threads_seen: list[tuple[str, bool]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_driver, "INLINE_SECONDS", -1.0)  # every statement is "slow"
    for _ in range(9):
        await _count_x(sqlite_core)
    on_loop = [inline for _, inline in threads_seen]
    # slow on the loop: 2 runs on the thread, then tried again, slow again: 4 runs
    assert on_loop == [True, False, False, True, False, False, False, False, True]


@pytest.mark.latency
async def test_a_statement_slow_once_comes_back_to_the_loop(
        sqlite_core: Core, threads_seen: list[tuple[str, bool]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Slow once (a merge, a checkpoint), quick after: a short penalty each time, never the
    thread for good."""
    monkeypatch.setattr(sqlite_driver, "INLINE_SECONDS", -1.0)
    await _count_x(sqlite_core)  # slow: the next 2 on the thread
    monkeypatch.setattr(sqlite_driver, "INLINE_SECONDS", 1.0)
    for _ in range(4):
        await _count_x(sqlite_core)
    monkeypatch.setattr(sqlite_driver, "INLINE_SECONDS", -1.0)
    await _count_x(sqlite_core)  # slow again, after quick runs: 2 owed again, not 4
    monkeypatch.setattr(sqlite_driver, "INLINE_SECONDS", 1.0)
    for _ in range(3):
        await _count_x(sqlite_core)
    on_loop = [inline for _, inline in threads_seen]
    assert on_loop == [True, False, False, True, True, True, False, False, True]


async def test_only_the_statements_own_cpu_makes_it_slow(
        sqlite_core: Core, threads_seen: list[tuple[str, bool]]) -> None:
    """A statement that waits on the loop's thread without using its CPU (here a function
    that sleeps; in real life the CPU taken by another thread) is not marked slow."""
    async with sqlite_core.engine.connect() as conn:
        driver = (await conn.get_raw_connection()).driver_connection
        assert isinstance(driver, OneTripConnection)
        driver._conn.create_function("pause", 1, time.sleep)
        for _ in range(2):
            assert await driver.run("SELECT pause(0.01)", ()) == [(None,)]
            await asyncio.sleep(0)  # the loop runs: the inline run (10 ms of wall time) ends
    assert [inline for _, inline in threads_seen] == [True, True]
    assert "SELECT pause(0.01)" not in sqlite_driver._SLOW


async def test_nothing_runs_inline_while_a_cancelled_call_is_still_on_the_thread(
        sqlite_core: Core, threads_seen: list[tuple[str, bool]]) -> None:
    async with sqlite_core.engine.connect() as conn:
        driver = (await conn.get_raw_connection()).driver_connection
        assert isinstance(driver, OneTripConnection)
        driver._conn.create_function("pause", 1, time.sleep)
        sqlite_driver._slow("SELECT pause(0.3)")  # to the thread, as a slow one goes
        pending = asyncio.create_task(driver.run("SELECT pause(0.3)", ()))
        await asyncio.sleep(0.05)
        pending.cancel()  # the caller is gone; the thread still runs the statement
        started = time.monotonic()
        assert await driver.run("SELECT 7", ()) == [(7,)]
        waited = time.monotonic() - started
    assert threads_seen == [("SELECT", False), ("SELECT", False)]
    assert waited >= 0.15  # it queued behind the cancelled call instead of racing it


@pytest.mark.latency
async def test_a_writer_waiting_for_the_lock_never_stalls_the_loop(sqlite_core: Core) -> None:
    """The second writer waits for the first on the thread: the loop goes on running, so the
    first writer can finish and commit (waiting inline would hold the loop, and the first
    writer with it, until the busy timeout, and then fail as "database is locked")."""
    beats: list[float] = []

    async def ticker() -> None:
        while True:
            beats.append(time.monotonic())
            await asyncio.sleep(0.01)

    async def first() -> None:
        async with sqlite_core.session() as s:
            await s.execute(insert(Setting).values(key="first", value={"v": 1}))
            await asyncio.sleep(0.3)  # holds the write lock, needs the loop to go on

    async def second() -> None:
        await asyncio.sleep(0.05)
        async with sqlite_core.session() as s:
            await s.execute(insert(Setting).values(key="second", value={"v": 2}))

    tick = asyncio.create_task(ticker())
    started = time.monotonic()
    await asyncio.wait_for(asyncio.gather(first(), second()), 5)
    tick.cancel()
    assert time.monotonic() - started < 3
    assert max(b - a for a, b in zip(beats, beats[1:], strict=False)) < 1.0  # never held
    async with sqlite_core.session() as s:
        assert sorted(await s.scalars(select(Setting.key).where(
            Setting.key.in_(["first", "second"])))) == ["first", "second"]


def _database_file(core: Core) -> str:
    database = core.engine.url.database
    assert database and database != ":memory:"
    return database


async def test_a_first_write_meeting_another_process_s_writer_waits_for_it_on_the_thread(
        sqlite_core: Core, threads_seen: list[tuple[str, bool]]) -> None:
    """The first write of a transaction tries the loop with no busy wait: when a writer the
    write gate does not know (another process) holds the lock, it gives up at once, undoes
    its half-begun transaction and waits on the thread instead, with the connection's busy
    timeout (on the loop it stays at zero)."""
    other = sqlite3.connect(_database_file(sqlite_core), isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("INSERT INTO settings (key, value, updated_at) "
                      "VALUES ('held', '1', '2026-01-01 00:00:00')")

        async def second() -> None:
            async with sqlite_core.session() as s:
                await s.execute(insert(Setting).values(key="waited", value={"v": 2}))
                raw = (await s.connection()).sync_connection.connection.driver_connection
                assert await raw.run("PRAGMA busy_timeout", ()) == [(0,)]  # on the loop
                assert await raw._execute(_busy_timeout, raw._conn) == 10000  # on the thread

        waiting = asyncio.create_task(second())
        await asyncio.sleep(0.2)
        assert not waiting.done()  # waiting on the thread for the lock, the loop free
        other.execute("COMMIT")
    finally:
        other.close()
    await asyncio.wait_for(waiting, 5)
    inserts = [seen for seen in threads_seen if seen[0] == "INSERT"]
    assert inserts == [("INSERT", True), ("INSERT", False)]
    async with sqlite_core.session() as s:
        assert sorted(await s.scalars(select(Setting.key).where(
            Setting.key.in_(["held", "waited"])))) == ["held", "waited"]


def _busy_timeout(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA busy_timeout").fetchone()[0])


async def test_a_read_meeting_a_lock_waits_for_it_on_the_thread(
        sqlite_core: Core, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read on the loop that finds the database locked (as while another process recovers
    it after a crash) neither sleeps there in SQLite's busy handler (the loop's busy timeout
    is zero) nor fails: it goes to the thread, which waits as long as the busy timeout
    allows."""
    # a first write: from now on the connection's busy wait is the thread's alone
    async with sqlite_core.session() as s:
        await s.execute(insert(Setting).values(key="before", value={"v": 1}))
    run, loop_thread = sqlite_driver._run, threading.get_ident()
    seen: list[tuple[bool, int]] = []

    def locked_once(conn: Any, sql: str, params: Any, many: bool) -> tuple[Any, ...]:
        if sql.startswith("SELECT"):
            on_loop = threading.get_ident() == loop_thread
            seen.append((on_loop, _busy_timeout(conn)))
            if on_loop and len(seen) == 1:
                locked = sqlite3.OperationalError("database is locked")
                locked.sqlite_errorcode = sqlite3.SQLITE_BUSY  # as SQLite's own says it
                raise locked
        return run(conn, sql, params, many)

    monkeypatch.setattr(sqlite_driver, "_run", locked_once)
    async with sqlite_core.session() as s:
        assert await s.scalar(select(Setting.key).where(Setting.key == "before")) == "before"
    assert seen == [(True, 0), (False, 10000)]


async def test_a_connection_that_wrote_closes_cleanly(sqlite_core: Core) -> None:
    """Closing runs on the thread like any call there (with the busy timeout set for it):
    nothing is left to do on the closed connection afterwards."""
    raw = await sqlite_driver.async_creator(_database_file(sqlite_core))()
    assert isinstance(raw, OneTripConnection)
    await raw.run("INSERT INTO settings (key, value, updated_at) "
                  "VALUES ('closing', '1', '2026-01-01 00:00:00')", ())
    await raw.commit()
    assert raw._busy_zero  # the loop's busy timeout is at zero, the thread's restored per call
    # the call that closes it must not set the loop's zero back afterwards ("Cannot operate
    # on a closed database")
    await raw.close()
    async with sqlite_core.session() as s:
        assert await s.get(Setting, "closing") is not None


async def test_writers_of_one_process_take_turns_at_the_write_gate(
        sqlite_core: Core, threads_seen: list[tuple[str, bool]], unhurried: None) -> None:
    """A second transaction of this process that wants to write while the first holds the
    lock waits for the gate on the loop (not in SQLite's busy handler on the thread), is let
    in as soon as the first commits, and writes inline; a reader is not held meanwhile."""
    async with sqlite_core.session() as holder:
        await holder.execute(insert(Setting).values(key="first", value={"v": 1}))
        raw = (await holder.connection()).sync_connection.connection.driver_connection
        gate = raw._gate
        waits = gate.waits
        order: list[str] = []

        async def second() -> None:
            async with sqlite_core.session() as s:
                await s.execute(insert(Setting).values(key="second", value={"v": 2}))
                order.append("second wrote")

        waiting = asyncio.create_task(second())
        await asyncio.sleep(0.2)
        assert not waiting.done() and gate.waits == waits + 1
        async with sqlite_core.session() as reader:
            assert await reader.get(Setting, "first") is None  # not committed yet
        order.append("first commits")
    await asyncio.wait_for(waiting, 5)
    assert order == ["first commits", "second wrote"]
    inserts = [seen for seen in threads_seen if seen[0] == "INSERT"]
    assert inserts == [("INSERT", True), ("INSERT", True)]  # no trip to the thread
    async with sqlite_core.session() as s:
        assert sorted(await s.scalars(select(Setting.key).where(
            Setting.key.in_(["first", "second"])))) == ["first", "second"]


async def test_many_writers_of_one_process_each_get_their_turn(
        sqlite_core: Core, threads_seen: list[tuple[str, bool]], unhurried: None) -> None:
    """Forty writers whose transactions each hold the lock across an await (as a tour's save
    does) all commit, each first write let in by the gate when the lock is free: none meets
    the lock and waits in SQLite's busy handler on the thread, where it could be starved
    into "database is locked"."""
    async def writer(n: int) -> None:
        await asyncio.sleep(n * 0.001)
        async with sqlite_core.session() as s:
            await s.execute(insert(Setting).values(key=f"turn-{n}", value={"v": n}))
            await asyncio.sleep(0.005)
            await s.execute(update(Setting).where(Setting.key == f"turn-{n}")
                            .values(value={"v": -n}))

    await asyncio.wait_for(asyncio.gather(*(writer(n) for n in range(40))), 30)
    inserts = [on_loop for sql, on_loop in threads_seen if sql == "INSERT"]
    assert inserts == [True] * 40
    async with sqlite_core.session() as s:
        assert await s.scalar(select(func.count()).select_from(Setting)
                              .where(Setting.key.like("turn-%"))) == 40


async def test_a_queue_behind_a_held_gate_drains_in_one_pass_of_the_loop(
        sqlite_core: Core, threads_seen: list[tuple[str, bool]], unhurried: None) -> None:
    """Writers queued behind a holder that waited (here: across a sleep) are all woken when
    it commits; each runs its transaction inline and gives the gate back before the next
    runs, so the queue drains without one pass of the event loop per writer."""
    opened = asyncio.Event()
    writers_ready: list[asyncio.Event] = [asyncio.Event() for _ in range(10)]

    async def writer(n: int) -> None:
        async with sqlite_core.session() as s:
            await s.execute(select(Setting.key).where(Setting.key == "nothing"))
            writers_ready[n].set()
            await opened.wait()
            await s.execute(insert(Setting).values(key=f"queued-{n}", value={"v": n}))

    async with sqlite_core.session() as holder:
        await holder.execute(insert(Setting).values(key="holder", value={"v": 0}))
        raw = (await holder.connection()).sync_connection.connection.driver_connection
        waits = raw._gate.waits
        tasks = [asyncio.create_task(writer(n)) for n in range(10)]
        for ready in writers_ready:
            await asyncio.wait_for(ready.wait(), 5)
        opened.set()
        await asyncio.sleep(0.05)
        assert raw._gate.waits == waits + 10 and not any(t.done() for t in tasks)
    passes = 0
    while not all(t.done() for t in tasks):
        await asyncio.sleep(0)
        passes += 1
        assert passes < 8, "the queue drains one writer per pass of the loop"
    await asyncio.gather(*tasks)
    assert [on_loop for sql, on_loop in threads_seen if sql == "INSERT"] == [True] * 11
    async with sqlite_core.session() as s:
        assert await s.scalar(select(func.count()).select_from(Setting)
                              .where(Setting.key.like("queued-%"))) == 10


async def test_the_write_gate_keeps_arrival_order_and_gives_up_at_its_deadline() -> None:
    gate = sqlite_driver.WriteGate()
    assert await gate.take(1)
    order: list[int] = []

    async def waiter(n: int) -> None:
        assert await gate.take(5)
        order.append(n)
        await asyncio.sleep(0)  # holds the gate across a pass of the loop
        gate.give_back()

    tasks = [asyncio.create_task(waiter(n)) for n in range(5)]
    await asyncio.sleep(0.01)
    late = asyncio.create_task(gate.take(0.05))  # not given in time: goes on without it
    cancelled = asyncio.create_task(gate.take(5))
    await asyncio.sleep(0.01)
    cancelled.cancel()
    assert await late is False
    gate.give_back()
    await asyncio.wait_for(asyncio.gather(*tasks), 5)
    assert order == [0, 1, 2, 3, 4]  # woken together, taken in turn, the rest re-queued
    assert gate.waits == 7 and not gate._waiters
    assert await asyncio.wait_for(gate.take(1), 1)  # free again: nobody left holding it


async def test_the_write_gate_goes_back_when_a_transaction_fails_or_is_cancelled(
        sqlite_core: Core) -> None:
    """A transaction that fails, or whose task is cancelled while it holds the gate, gives
    the gate back with its rollback: the next writer is not kept waiting."""
    with pytest.raises(IntegrityError):
        async with sqlite_core.session() as s:
            s.add(Setting(key="dup", value={"v": 1}))
            await s.flush()
            await s.execute(insert(Setting).values(key="dup", value={"v": 2}))
    held = asyncio.Event()

    async def cancelled() -> None:
        async with sqlite_core.session() as s:
            await s.execute(insert(Setting).values(key="cancelled", value={"v": 1}))
            held.set()
            await asyncio.sleep(30)

    task = asyncio.create_task(cancelled())
    await asyncio.wait_for(held.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    async def write() -> None:
        async with sqlite_core.session() as s:
            await s.execute(insert(Setting).values(key="after", value={"v": 1}))

    await asyncio.wait_for(write(), 2)  # well within the gate's and SQLite's 10 s
    async with sqlite_core.session() as s:
        assert await s.get(Setting, "cancelled") is None
        assert await s.get(Setting, "after") is not None


async def test_a_rollback_after_a_cancelled_write_undoes_it_once_the_thread_ran_it(
        sqlite_core: Core) -> None:
    """A write whose caller was cancelled while it waited on the thread still runs there; the
    rollback that follows goes behind it (it is not skipped as "no transaction open"), so the
    connection goes back to the pool clean and the write is not committed by its next user."""
    async with sqlite_core.engine.connect() as conn:
        driver = (await conn.get_raw_connection()).driver_connection
        assert isinstance(driver, OneTripConnection)
        driver._conn.create_function("pause", 1, time.sleep)
        sqlite_driver._slow("SELECT pause(0.2)")
        busy = asyncio.create_task(driver.run("SELECT pause(0.2)", ()))
        write = asyncio.create_task(driver.run(
            "INSERT INTO settings (key, value) VALUES ('cancelled', '1')", ()))
        await asyncio.sleep(0.05)
        write.cancel()  # still queued behind the pause: not begun, no transaction yet
        await driver.rollback()
        await busy
        for _ in range(100):  # until the thread has run everything it was handed
            if driver._finished == driver._sent:
                break
            await asyncio.sleep(0.01)
        assert not driver._conn.in_transaction
        assert await driver.run("SELECT count(*) FROM settings WHERE key = 'cancelled'",
                                ()) == [(0,)]


async def test_a_long_run_of_inline_statements_goes_to_the_thread_now_and_then(
        sqlite_core: Core, threads_seen: list[tuple[str, bool]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_driver, "INLINE_RUN_SECONDS", 1e-9)  # one inline, then a trip
    async with sqlite_core.session() as s:
        for _ in range(4):
            await s.execute(select(Setting.key).where(Setting.key == "nothing"))
    inline = [on_loop for _, on_loop in threads_seen]
    assert len(inline) == 4 and inline.count(True) == 2  # every other one
    assert all(not (a and b) for a, b in zip(inline, inline[1:], strict=False))


async def test_commits_run_inline_and_every_few_a_checkpoint_runs_beside_them(
        sqlite_core: Core, monkeypatch: pytest.MonkeyPatch, unhurried: None) -> None:
    """A write transaction costs no trip to the thread when nobody else writes: first write,
    later writes and the commit all run on the loop, and what it wrote is stored (another
    connection reads it). Every `CHECKPOINT_EVERY`th commit starts a checkpoint on a thread
    and connection of its own, which copies the WAL into the database while no writer waits
    for it."""
    monkeypatch.setattr(sqlite_driver, "CHECKPOINT_EVERY", 4)
    checkpoints: list[tuple[bool, tuple[int, int, int]]] = []
    loop_thread = threading.get_ident()
    checkpoint = sqlite_driver.checkpoint

    def recorded(conn: Any) -> tuple[int, int, int]:
        result = checkpoint(conn)
        checkpoints.append((threading.get_ident() == loop_thread, result))
        return result

    monkeypatch.setattr(sqlite_driver, "checkpoint", recorded)
    trips: list[int] = []
    for i in range(8):
        async with sqlite_core.session() as s:
            driver = (await s.connection()).sync_connection.connection.driver_connection
            checkpointer = driver._checkpointer
            if i == 0:
                checkpointer._commits = 0
            sent = driver._sent
            await s.execute(insert(Setting).values(key=f"c{i}", value={"v": i}))
            await s.execute(update(Setting).where(Setting.key == f"c{i}").values(value={"v": -i}))
        trips.append(driver._sent - sent)
        for _ in range(200):  # the checkpoint the 4th commit started, before the next ones
            if not checkpointer._running:
                break
            await asyncio.sleep(0.01)
    assert trips == [0] * 8
    assert [on_loop for on_loop, _ in checkpoints] == [False, False]  # 4th and 8th commit
    busy, frames, copied = checkpoints[-1][1]
    assert busy == 0 and frames > 0 and copied == frames  # the whole WAL is in the database
    async with sqlite_core.engine.connect() as other:
        raw = (await other.get_raw_connection()).driver_connection
        assert await raw.run("SELECT count(*) FROM settings WHERE key LIKE 'c%'", ()) == [(8,)]


def test_one_kept_thread_and_connection_run_the_checkpoints_until_idle(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Successive checkpoints run on one thread with one connection, opened once (not a new
    thread and connection for each); once no checkpoint is asked for a while, the connection
    is closed and the thread ends, and the next count starts them again. Every checkpoint
    still copies the whole WAL into the database."""
    monkeypatch.setattr(sqlite_driver, "CHECKPOINT_EVERY", 2)
    monkeypatch.setattr(sqlite_driver, "CHECKPOINTER_IDLE_SECONDS", 0.3)
    path = tmp_path / "c.db"
    opened: list[sqlite3.Connection] = []
    closed: list[sqlite3.Connection] = []

    class Tracked(sqlite3.Connection):
        def close(self) -> None:
            closed.append(self)
            super().close()

    def connect() -> sqlite3.Connection:
        conn = sqlite3.connect(path, check_same_thread=False, factory=Tracked)
        opened.append(conn)
        return conn

    results: list[tuple[int, tuple[int, int, int]]] = []
    checkpoint = sqlite_driver.checkpoint

    def recorded(conn: Any) -> tuple[int, int, int]:
        result = checkpoint(conn)
        results.append((threading.get_ident(), result))
        return result

    monkeypatch.setattr(sqlite_driver, "checkpoint", recorded)
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("CREATE TABLE t (x)")
    checkpointer = sqlite_driver.Checkpointer(connect)

    def commits(n: int) -> None:
        for i in range(n):
            writer.execute("INSERT INTO t VALUES (?)", (i,))
            checkpointer.committed()
            deadline = time.monotonic() + 5
            while checkpointer._running and time.monotonic() < deadline:
                time.sleep(0.005)

    commits(6)  # three checkpoints
    assert len(results) == 3 and len(opened) == 1 and not closed
    assert len({ident for ident, _ in results}) == 1
    assert threading.get_ident() not in {ident for ident, _ in results}
    assert all(busy == 0 and copied == frames for _, (busy, frames, copied) in results)
    deadline = time.monotonic() + 5
    while checkpointer._thread is not None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert checkpointer._thread is None and closed == opened  # idle: closed, thread gone
    commits(2)
    assert len(results) == 4 and len(opened) == 2  # started again
    writer.close()


async def test_a_session_after_another_takes_the_connection_given_back_last(
        sqlite_core: Core) -> None:
    """With several connections open, sessions one after another keep using the one given
    back last (its page cache is still current), instead of going round all of them."""

    async def driver_of(s: Any) -> Any:
        return (await s.connection()).sync_connection.connection.driver_connection

    async with sqlite_core.session() as a, sqlite_core.session() as b, \
            sqlite_core.session() as c:
        held = {id(await driver_of(x)) for x in (a, b, c)}
    assert len(held) == 3
    used = []
    for _ in range(4):
        async with sqlite_core.session() as s:
            used.append(id(await driver_of(s)))
    assert len(set(used)) == 1 and used[0] in held


async def test_a_disposed_engine_leaves_every_commit_in_the_database_file(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once the engine is disposed of (the server stops), the WAL has been copied into the
    database file and removed, checkpointer's connection included: the file alone, copied
    as a backup, holds every commit. The direct path stays open (no engine event)."""
    from evacore.store.db import create_engine, dispose_engine, make_sessionmaker

    monkeypatch.setattr(sqlite_driver, "CHECKPOINT_EVERY", 2)
    path = tmp_path / "kept.db"
    engine = create_engine(f"sqlite+aiosqlite:///{path}")
    async with engine.begin() as conn:
        await conn.execute(text("CREATE TABLE t (x INTEGER)"))
    sessions = make_sessionmaker(engine)
    for i in range(5):  # checkpoints at the 2nd and 4th commit, one more commit after
        async with sessions() as s, s.begin():
            await s.execute(text("INSERT INTO t VALUES (:x)"), {"x": i})
        await asyncio.sleep(0.05)
        assert not engine.sync_engine._has_events
    await dispose_engine(engine)
    assert not (tmp_path / "kept.db-wal").exists()
    backup = tmp_path / "backup.db"
    backup.write_bytes(path.read_bytes())
    copy = sqlite3.connect(backup)
    assert copy.execute("SELECT count(*) FROM t").fetchone() == (5,)
    copy.close()
