"""`/v1/settings`: instance-wide settings (master only): the global World Info settings under
SillyTavern's names (SPEC §13 "Lorebook settings") and the default connection (R14.0).

Must not: hold the settings' meaning (services/lore.py validates and merges them).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from evacore.errors import NotFound
from evacore.lore.model import WorldInfoSettings
from evacore.server.auth import Master
from evacore.server.deps import SessionDep
from evacore.services.lore import SETTING_KEY, global_world_info, parse_world_info
from evacore.store.connections import DEFAULT_SETTING
from evacore.store.settings import get_setting, put_setting
from evacore.store.tables import Connection

router = APIRouter(tags=["settings"])


class SettingsPatch(BaseModel):
    """`world_info`: keys to set (a `null` value resets that key to its default);
    `default_connection_id`: the connection chats get when they name none (`null`: the
    built-in `mock`)."""

    model_config = ConfigDict(extra="forbid")
    world_info: dict[str, Any] | None = None
    default_connection_id: str | None = Field(default=None, max_length=64)


async def _settings_json(session: Any) -> dict[str, Any]:
    values = await global_world_info(session)
    default = await session.get(Connection, await get_setting(session, DEFAULT_SETTING) or "")
    return {"world_info": WorldInfoSettings.from_dict(values).to_dict(),
            "default_connection_id": default.id if default is not None else None}


@router.get("/settings")
async def get_settings(who: Master, session: SessionDep) -> dict[str, Any]:
    """Every setting in force (defaults filled in)."""
    return await _settings_json(session)


@router.patch("/settings")
async def patch_settings(body: SettingsPatch, who: Master, session: SessionDep) -> dict[str, Any]:
    """Change some settings; a bad value → 422 and nothing changes."""
    if body.world_info is not None:
        new, _ = parse_world_info(body.world_info, strict=True)
        cleared = {str(k).removeprefix("world_info_") for k, v in body.world_info.items()
                   if v is None}
        current = await global_world_info(session)
        merged = {k: v for k, v in {**current, **new}.items() if k not in cleared}
        await put_setting(session, SETTING_KEY, merged)
    if "default_connection_id" in body.model_fields_set:
        connection_id = body.default_connection_id
        if connection_id is not None and await session.get(Connection, connection_id) is None:
            raise NotFound(f"connection {connection_id} not found")
        await put_setting(session, DEFAULT_SETTING, connection_id)
    return await _settings_json(session)
