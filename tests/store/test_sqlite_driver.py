"""The one-trip SQLite cursor (store/sqlite_driver.py) keeps what SQLAlchemy relies on:
row counts, many-row inserts, errors as the driver's own, transactions that commit or roll
back, and concurrent sessions on the one file."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import func, insert, select, text, update
from sqlalchemy.exc import IntegrityError

from evacore.core import Core
from evacore.store.sqlite_driver import OneTripConnection
from evacore.store.tables import Setting


@pytest.fixture
def sqlite_core(core: Core) -> Core:
    if core.engine.dialect.name != "sqlite":
        pytest.skip("the SQLite driver only")
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
