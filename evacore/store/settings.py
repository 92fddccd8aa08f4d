"""Instance-wide settings and state kept as JSON by key (world info settings, global variables).

Must not: validate setting contents; callers own their shapes. Reads go through the
short-lived memory of `recall` (every tour reads the same keys); each caller gets its own copy.
"""

from __future__ import annotations

import copy
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from evacore.store.recall import recall
from evacore.store.tables import Setting


async def get_setting(session: AsyncSession, key: str) -> Any:
    async def load() -> Any:
        row = await session.get(Setting, key)
        return None if row is None else (row.value or {}).get("v")

    return copy.deepcopy(await recall(session, "settings", key, load))


async def put_setting(session: AsyncSession, key: str, value: Any) -> None:
    row = await session.get(Setting, key)
    if row is None:
        session.add(Setting(key=key, value={"v": value}))
    else:
        row.value = {"v": value}
    await session.flush()
