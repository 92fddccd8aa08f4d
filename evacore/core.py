"""The running core of one instance: settings, database, and the services tours need.

Must not: speak HTTP (server/) or parse CLI arguments (cli.py); both build a Core and use it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from evacore.config import Settings
from evacore.domain.ids import new_id, utcnow
from evacore.logs import get_logger
from evacore.store import migrate
from evacore.store.db import create_engine, make_sessionmaker
from evacore.store.tables import Tour
from evacore.store.users import ensure_master

log = get_logger(__name__)


@dataclass
class Core:
    settings: Settings
    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    instance_id: str = field(default_factory=new_id)
    bootstrap_token: str | None = None
    """The master token created on this start, if any (printed once by the caller)."""
    services: dict[str, Any] = field(default_factory=dict)

    @asynccontextmanager
    async def session(self) -> AsyncIterator[AsyncSession]:
        """A session in one transaction: committed on success, rolled back on error."""
        async with self.sessions() as s, s.begin():
            yield s

    async def aclose(self) -> None:
        for service in reversed(list(self.services.values())):
            close = getattr(service, "aclose", None)
            if close is not None:
                await close()
        await self.engine.dispose()


async def start_core(settings: Settings, *, run_migrations: bool = True) -> Core:
    """Open the database, apply migrations, bootstrap the master, mark crashed tours."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    engine = create_engine(settings.db_url)
    if run_migrations:
        await migrate.upgrade(engine)
    core = Core(
        settings=settings,
        engine=engine,
        sessions=make_sessionmaker(engine),
        instance_id=settings.instance_id or new_id(),
    )
    async with core.session() as s:
        token = settings.master_token.get_secret_value() if settings.master_token else None
        core.bootstrap_token = await ensure_master(s, token)
        await mark_interrupted(s, settings.instance_id)
    from evacore.services import install_services

    await install_services(core)
    return core


async def mark_interrupted(session: AsyncSession, instance_id: str | None = None) -> int:
    """Tours left `running` by a crash become `interrupted` (R7).

    With several instances on one database, only this instance's own tours are touched
    (an instance id set in settings); without one, every running tour is.
    """
    stmt = update(Tour).where(Tour.status == "running")
    if instance_id:
        stmt = stmt.where(Tour.instance_id == instance_id)
    result = await session.execute(stmt.values(status="interrupted", finished_at=utcnow()))
    count = result.rowcount or 0
    if count:
        log.warning("tours.interrupted", count=count)
    return count
