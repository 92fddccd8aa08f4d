"""Sessions end without a pass of the event loop when ending waits for nothing, a close that
does wait is finished even when its caller is cancelled, and `core.session()` keeps its
contract (commit on success; rollback on an error, a cancel or a failed commit; the
connection back in the pool) on its shorter path through SQLAlchemy (store/db.py)."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import bindparam, insert, select

from evacore.core import Core
from evacore.store import direct
from evacore.store.db import close_session, connect_now
from evacore.store.tables import Setting


async def test_a_session_whose_transaction_ended_closes_without_a_pass_of_the_loop(
        core: Core) -> None:
    loop = asyncio.get_running_loop()
    s = core.sessions()
    await s.execute(select(Setting.key).limit(1))
    await s.commit()  # the connection is back in the pool: closing has nothing to wait for
    passes: list[int] = []
    loop.call_soon(passes.append, 1)
    await close_session(s)
    assert passes == []
    assert core.engine.pool.checkedout() == 0  # type: ignore[attr-defined]


async def test_a_write_session_on_sqlite_runs_without_a_pass_of_the_loop(core: Core) -> None:
    """On SQLite with no other writer, a whole write session (first write, commit, close)
    runs inline: the tour that opens it is not sent behind every other ready task."""
    if core.engine.dialect.name != "sqlite":
        pytest.skip("SQLite's statements run on the loop; PostgreSQL's go over the network")
    async with core.session() as warm:  # a connection in the pool, its pragmas read
        await warm.execute(insert(Setting).values(key="warm", value={"v": 0}))
    passes: list[int] = []
    asyncio.get_running_loop().call_soon(passes.append, 1)
    async with core.session() as written:
        await written.execute(insert(Setting).values(key="through", value={"v": 1}))
    assert passes == []
    async with core.session() as s:
        assert await s.get(Setting, "through") is not None


async def test_a_close_that_waits_is_finished_when_its_caller_is_cancelled(core: Core) -> None:
    """An open write transaction is rolled back by the close (over the network, or on
    SQLite's thread): a cancel that lands meanwhile is raised once the rollback is done, the
    connection is back in the pool, and nothing of the transaction is stored."""
    s = core.sessions()
    await s.execute(insert(Setting).values(key="undone", value={"v": 1}))
    closing = asyncio.create_task(close_session(s))
    await asyncio.sleep(0)  # the close has begun and waits for its rollback
    assert not closing.done()
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closing
    assert core.engine.pool.checkedout() == 0  # type: ignore[attr-defined]
    async with core.session() as fresh:
        assert await fresh.get(Setting, "undone") is None


async def test_a_session_commits_on_success_and_rolls_back_on_error_or_cancel(
        core: Core) -> None:
    """`core.session()`: what the block wrote is stored when it ends normally, nothing of it
    when it raises or is cancelled, and the connection is back in the pool each time."""
    async with core.session() as s:
        await s.execute(insert(Setting).values(key="kept", value={"v": 1}))
    with pytest.raises(RuntimeError):
        async with core.session() as s:
            await s.execute(insert(Setting).values(key="raised", value={"v": 1}))
            raise RuntimeError("the block failed")

    async def cancelled() -> None:
        async with core.session() as s:
            await s.execute(insert(Setting).values(key="cancelled", value={"v": 1}))
            await asyncio.sleep(10)

    task = asyncio.create_task(cancelled())
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert core.engine.pool.checkedout() == 0  # type: ignore[attr-defined]
    async with core.session() as s:
        assert await s.get(Setting, "kept") is not None
        assert await s.get(Setting, "raised") is None
        assert await s.get(Setting, "cancelled") is None


async def test_a_failed_commit_rolls_back_and_frees_the_connection(core: Core) -> None:
    """A commit that fails (here: a flush that breaks a unique key) raises to the caller,
    stores nothing of the block and leaves no connection checked out."""
    async with core.session() as s:
        s.add(Setting(key="taken", value={"v": 1}))
    with pytest.raises(Exception, match="(?i)unique|duplicate"):
        async with core.session() as s:
            await s.execute(insert(Setting).values(key="beside", value={"v": 1}))
            s.add(Setting(key="taken", value={"v": 2}))  # flushed by the commit: it fails
    assert core.engine.pool.checkedout() == 0  # type: ignore[attr-defined]
    async with core.session() as s:
        assert (await s.get(Setting, "taken")).value == {"v": 1}  # type: ignore[union-attr]
        assert await s.get(Setting, "beside") is None


async def test_a_pooled_connection_that_was_invalidated_is_reopened_for_the_next_session(
        core: Core) -> None:
    """A session takes an idle pooled connection without a hop into SQLAlchemy's greenlet;
    one that was invalidated (after a disconnect) has to be reopened, which needs the hop:
    the session still gets a working connection and its statements run."""
    if core.engine.dialect.name != "sqlite":
        pytest.skip("the direct path and its pooled connection are SQLite's")
    async with core.engine.connect() as conn:
        await conn.invalidate()
    async with core.session() as s:
        assert connect_now(s.sync_session) is None  # the idle one must be reopened first
        await direct.execute(s, insert(Setting).values(key=bindparam("k"), value={"v": 1}),
                             {"k": "after"})
    async with core.session() as s:
        assert connect_now(s.sync_session) is not None  # reopened, pooled, handed at once
        assert await s.get(Setting, "after") is not None
