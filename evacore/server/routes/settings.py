"""`/v1/settings`: instance-wide settings (master only); for now the global World Info
settings under SillyTavern's names (SPEC §13 "Lorebook settings").

Must not: hold the settings' meaning (lore/service.py validates and merges them).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict

from evacore.lore.model import WorldInfoSettings
from evacore.server.auth import Master
from evacore.server.deps import SessionDep
from evacore.services.lore import SETTING_KEY, global_world_info, parse_world_info
from evacore.store.settings import put_setting

router = APIRouter(tags=["settings"])


class SettingsPatch(BaseModel):
    """`world_info`: keys to set (a `null` value resets that key to its default)."""

    model_config = ConfigDict(extra="forbid")
    world_info: dict[str, Any] | None = None


async def _settings_json(session: Any) -> dict[str, Any]:
    values = await global_world_info(session)
    return {"world_info": WorldInfoSettings.from_dict(values).to_dict()}


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
    return await _settings_json(session)
