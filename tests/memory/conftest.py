"""Fixtures for memory tests: the shared `core` plus an empty retrieval index (documents are
not bound to chats, so the shared wipe does not reach all of them)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text

from evacore.config import Settings
from evacore.core import Core, start_core
from evacore.store.db import create_engine
from tests.conftest import wipe


async def wipe_retrieval(url: str) -> None:
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(text("DELETE FROM retrieval_chunks"))
            await conn.execute(text("DELETE FROM retrieval_documents"))
    finally:
        await engine.dispose()


@pytest.fixture
async def core(settings: Settings) -> AsyncIterator[Core]:
    await wipe(settings.db_url)
    await wipe_retrieval(settings.db_url)
    c = await start_core(settings)
    try:
        yield c
    finally:
        await c.aclose()
