"""Instance-wide settings and state kept as JSON by key (world info settings, global variables).

Must not: validate setting contents; callers own their shapes. Reads are answered from a
short-lived per-database memory (every tour reads the same few keys); a write drops its key
from it once the write commits, so this process reads its own writes at once and other
processes' writes within `REMEMBER_SECONDS`.
"""

from __future__ import annotations

import copy
import time
import weakref
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncSession

from evacore.store.tables import Setting

REMEMBER_SECONDS = 2.0
_remembered: weakref.WeakKeyDictionary[Any, dict[str, tuple[float, Any]]] = \
    weakref.WeakKeyDictionary()


def _memory(session: AsyncSession) -> dict[str, tuple[float, Any]]:
    engine = session.get_bind()
    known = _remembered.get(engine)
    if known is None:
        known = _remembered[engine] = {}
    return known


async def get_setting(session: AsyncSession, key: str) -> Any:
    known = _memory(session)
    hit = known.get(key)
    now = time.monotonic()
    if hit is not None and hit[0] > now and key not in session.info.get("settings_written", ()):
        return copy.deepcopy(hit[1])
    row = await session.get(Setting, key)
    value = None if row is None else (row.value or {}).get("v")
    if not session.info.get("settings_written"):
        known[key] = (now + REMEMBER_SECONDS, copy.deepcopy(value))
    return value


async def put_setting(session: AsyncSession, key: str, value: Any) -> None:
    row = await session.get(Setting, key)
    if row is None:
        session.add(Setting(key=key, value={"v": value}))
    else:
        row.value = {"v": value}
    await session.flush()
    written = session.info.setdefault("settings_written", set())
    if not written:
        known = _memory(session)

        def forget(*_: Any) -> None:
            for name in session.info.pop("settings_written", ()):
                known.pop(name, None)

        event.listen(session.sync_session, "after_commit", forget, once=True)
        event.listen(session.sync_session, "after_rollback", forget, once=True)
    written.add(key)
    _memory(session).pop(key, None)
