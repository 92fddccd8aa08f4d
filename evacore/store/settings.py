"""Instance-wide settings and state kept as JSON by key (world info settings, global variables).

Must not: validate setting contents; callers own their shapes. Reads go through the
short-lived memory of `recall` (every tour reads the same keys); each caller gets its own copy.
"""

from __future__ import annotations

import copy
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.ext.asyncio import AsyncSession

from evacore.store import direct
from evacore.store.recall import recall
from evacore.store.tables import Setting

_VALUE = select(Setting.__table__.c.value).where(Setting.__table__.c.key == bindparam("p_key"))
"""Built once: a tour reads a setting or two whenever `recall` has forgotten them."""


async def get_setting(session: AsyncSession, key: str) -> Any:
    async def load() -> Any:
        # a statement run on the driver (`store/direct.py`): in a tour's lean read session
        # the ORM's `session.get` would open an ordinary session first
        rows = await direct.execute(session, _VALUE, {"p_key": key})
        return (rows[0][0] or {}).get("v") if rows else None

    return copy.deepcopy(await recall(session, "settings", key, load))


async def put_setting(session: AsyncSession, key: str, value: Any) -> None:
    row = await session.get(Setting, key)
    if row is None:
        session.add(Setting(key=key, value={"v": value}))
    else:
        row.value = {"v": value}
    await session.flush()
