"""Sessions end without a pass of the event loop when ending waits for nothing, and a close
that does wait is finished even when its caller is cancelled (store/db.py)."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import insert, select

from evacore.core import Core
from evacore.store.db import close_session
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
