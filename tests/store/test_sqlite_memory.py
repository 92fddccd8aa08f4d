"""SQLite's memory stays bounded however many pooled connections read a large database: an
instance under load must not grow by each connection's page cache (store/db.py,
SQLITE_CACHE_KIB)."""

from __future__ import annotations

import asyncio
import ctypes
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import text

from evacore.store.db import SQLITE_CACHE_KIB, SQLITE_POOL_SIZE, create_engine


def _sqlite_library() -> ctypes.CDLL:
    """The SQLite library the interpreter's sqlite3 module runs on (its memory counters)."""
    sqlite3.connect(":memory:").close()
    maps = Path("/proc/self/maps")
    paths = sorted({line.split()[-1] for line in maps.read_text().splitlines()
                    if "libsqlite3" in line}) if maps.exists() else []
    if not paths:
        pytest.skip("the sqlite3 module carries its own SQLite: no shared counters to read")
    lib = ctypes.CDLL(paths[0])
    lib.sqlite3_memory_used.restype = ctypes.c_int64
    return lib


async def test_a_pool_reading_a_large_database_keeps_sqlite_memory_bounded(
        tmp_path: Path) -> None:
    lib = _sqlite_library()
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'big.db'}")
    try:
        async with engine.begin() as conn:
            await conn.execute(text("CREATE TABLE pages (id INTEGER PRIMARY KEY, body TEXT)"))
            await conn.execute(text("INSERT INTO pages (body) SELECT printf('%.10000c', 'x') "
                                    "FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL "
                                    "SELECT i + 1 FROM n WHERE i < 400) SELECT i FROM n)"))
        before = lib.sqlite3_memory_used()
        assert before > 0

        async def scan(gate: asyncio.Barrier) -> int:
            async with engine.connect() as conn:
                await gate.wait()  # every connection of the pool open at once
                return int((await conn.execute(
                    text("SELECT sum(length(body)) FROM pages"))).scalar_one())

        gate = asyncio.Barrier(SQLITE_POOL_SIZE)
        sums = await asyncio.gather(*(scan(gate) for _ in range(SQLITE_POOL_SIZE)))
        assert sums == [4_000_000] * SQLITE_POOL_SIZE
        used = lib.sqlite3_memory_used()
        # at SQLite's default, 32 connections of up to 2 MB of pages each would hold 64 MB
        caches = SQLITE_POOL_SIZE * SQLITE_CACHE_KIB * 1024
        assert used - before <= caches + 8 * 1024 * 1024, (used, before)
    finally:
        await engine.dispose()
