"""Instance-wide settings and state kept as JSON by key (world info settings, global variables).

Must not: validate setting contents; callers own their shapes.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from evacore.store.tables import Setting


async def get_setting(session: AsyncSession, key: str) -> Any:
    row = await session.get(Setting, key)
    return None if row is None else (row.value or {}).get("v")


async def put_setting(session: AsyncSession, key: str, value: Any) -> None:
    row = await session.get(Setting, key)
    if row is None:
        session.add(Setting(key=key, value={"v": value}))
    else:
        row.value = {"v": value}
    await session.flush()
