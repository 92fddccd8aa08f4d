"""Stored presets (instruct, context, system prompt, reasoning): read, list, find by name.

Must not: validate template fields (importing/presets.py does) or render anything.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from evacore.errors import NotFound
from evacore.store.tables import Preset


async def get_preset(session: AsyncSession, preset_id: str) -> Preset:
    preset = await session.get(Preset, preset_id)
    if preset is None:
        raise NotFound(f"preset {preset_id} not found")
    return preset


async def list_presets(session: AsyncSession, kind: str | None = None, *, limit: int = 1000,
                       offset: int = 0) -> list[Preset]:
    stmt = select(Preset).order_by(Preset.kind, Preset.name, Preset.id)
    if kind is not None:
        stmt = stmt.where(Preset.kind == kind)
    return list((await session.scalars(stmt.offset(offset).limit(limit))).all())


async def find_preset(session: AsyncSession, kind: str, name: str) -> Preset | None:
    """The oldest preset of `kind` called `name`."""
    stmt = (select(Preset).where(Preset.kind == kind, Preset.name == name)
            .order_by(Preset.id).limit(1))
    return (await session.scalars(stmt)).first()


def preset_json(p: Preset, *, with_data: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": p.id,
        "kind": p.kind,
        "name": p.name,
        "created_at": p.created_at.isoformat() if p.created_at else None,
        "updated_at": p.updated_at.isoformat() if p.updated_at else None,
    }
    if with_data:
        out["data"] = p.data or {}
    return out
