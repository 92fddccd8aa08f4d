"""Apply Alembic migrations (upgrade/downgrade) on an async engine, under a database-wide lock
so that any number of instances may start at once on one database; tell autogenerate which
hand-made objects to leave alone.

Must not: create tables any other way (no `metadata.create_all`); every schema change is a migration.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

MIGRATIONS_DIR = Path(__file__).parent / "migrations"

FULL_TEXT_TABLE_PREFIX = "retrieval_fts"
"""SQLite: the FTS5 table `retrieval_fts`, its shadow tables and its vocabulary table."""
FULL_TEXT_COLUMNS = frozenset({("retrieval_chunks", "tsv")})
"""PostgreSQL: the generated tsvector column."""
FULL_TEXT_INDEXES = frozenset({"ix_retrieval_chunks_tsv"})
"""PostgreSQL: the GIN index on it."""


def include_object(obj: Any, name: str | None, type_: str, reflected: bool,
                   compare_to: Any) -> bool:
    """Autogenerate's filter: the full-text structures migration 0002 makes by hand, per
    database, are not in the metadata and must not be dropped (or even compared)."""
    if type_ == "table":
        return not (name or "").startswith(FULL_TEXT_TABLE_PREFIX)
    if type_ == "column":
        return (getattr(obj.table, "name", None), name) not in FULL_TEXT_COLUMNS
    if type_ == "index":
        return name not in FULL_TEXT_INDEXES
    return True


def alembic_config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    return cfg


MIGRATION_LOCK_KEY = 0x65766163  # "evac"
"""The PostgreSQL advisory lock every instance takes around its migrations."""


async def upgrade(engine: AsyncEngine, revision: str = "head", *, locked: bool = False) -> None:
    """Migrate to `revision`; `locked`: the caller holds `database_lock` already."""
    async with _maybe_locked(engine, locked), engine.begin() as conn:
        await conn.run_sync(_run, "upgrade", revision)


async def downgrade(engine: AsyncEngine, revision: str = "base") -> None:
    async with database_lock(engine), engine.begin() as conn:
        await conn.run_sync(_run, "downgrade", revision)


@asynccontextmanager
async def _maybe_locked(engine: AsyncEngine, locked: bool) -> AsyncIterator[None]:
    if locked:
        yield
        return
    async with database_lock(engine):
        yield


@asynccontextmanager
async def database_lock(engine: AsyncEngine) -> AsyncIterator[None]:
    """One starting instance at a time (migrations, then the bootstrap rows): a PostgreSQL
    advisory lock held on a connection of its own, or for SQLite an exclusive lock on a file
    next to the database. The others wait, then find nothing left to do."""
    if engine.dialect.name == "postgresql":
        async with engine.connect() as conn:
            await conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
            await conn.commit()
            try:
                yield
            finally:
                await conn.execute(text("SELECT pg_advisory_unlock(:key)"),
                                   {"key": MIGRATION_LOCK_KEY})
                await conn.commit()
        return
    database = engine.url.database
    if not database or database == ":memory:":
        yield
        return
    fd = os.open(f"{database}.migrate-lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        await asyncio.to_thread(fcntl.flock, fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


async def current(engine: AsyncEngine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    async with engine.connect() as conn:
        return await conn.run_sync(lambda c: MigrationContext.configure(c).get_current_revision())


def _run(sync_conn, action: str, revision: str) -> None:  # type: ignore[no-untyped-def]
    cfg = alembic_config()
    cfg.attributes["connection"] = sync_conn
    getattr(command, action)(cfg, revision)
