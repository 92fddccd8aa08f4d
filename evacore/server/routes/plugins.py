"""`/v1/plugins` (master): list plugins with state, capabilities, permissions and failures;
`PATCH` enables/disables, grants permissions and edits settings (validated).

Must not: run hooks.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from evacore.server.auth import Master
from evacore.server.deps import CoreDep, SessionDep

router = APIRouter(tags=["plugins"])


class PluginPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    enabled: StrictBool | None = None
    permissions: list[str] | None = Field(default=None, max_length=32)
    settings: dict[str, Any] | None = None


# Each route first takes what another instance stored (R14.5): it shows the shared state,
# and a change is made over it, never over a stale copy.
@router.get("/plugins")
async def list_plugins(_: Master, core: CoreDep, session: SessionDep) -> dict[str, Any]:
    await core.plugins.refresh(session)
    return {"plugins": core.plugins.manager.list()}


@router.get("/plugins/{name}")
async def get_plugin(name: str, _: Master, core: CoreDep,
                     session: SessionDep) -> dict[str, Any]:
    await core.plugins.refresh(session)
    return core.plugins.manager.describe(name)


@router.patch("/plugins/{name}")
async def patch_plugin(name: str, body: PluginPatch, _: Master, core: CoreDep,
                       session: SessionDep) -> dict[str, Any]:
    host = core.plugins
    await host.refresh(session)
    host.manager.update(name, enabled=body.enabled, permissions=body.permissions,
                        settings=body.settings)
    await host.persist(session, {name})
    return host.manager.describe(name)
