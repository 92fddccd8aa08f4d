"""`/v1/presets` (R8.2): SillyTavern instruct, context, system-prompt and reasoning presets —
import a file (a master export yields several), create from JSON, list, read, edit, export,
delete. A connection names an instruct preset by name or id in `instruct.preset`.

Must not: render templates (render/). Any user reads; writing needs trusted or the master.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from evacore.formats.presets import read_preset, write_preset
from evacore.importing.presets import preset_file, store_preset, store_presets, validate_preset
from evacore.importing.upload import download_headers, import_limits, read_upload, upload_body
from evacore.server.auth import AnyUser, Trusted
from evacore.server.deps import CoreDep, SessionDep
from evacore.store import presets as repo

router = APIRouter(tags=["presets"])

Kind = Literal["instruct", "context", "sysprompt", "reasoning", "unknown"]
Name = Annotated[str, Field(min_length=1, max_length=300)]


class PresetIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Kind
    name: Name
    data: dict[str, Any] = Field(default_factory=dict)


class PresetPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: Name | None = None
    data: dict[str, Any] | None = None


@router.post("/presets/import", status_code=201, openapi_extra=upload_body())
async def import_presets(request: Request, who: Trusted, core: CoreDep) -> dict[str, Any]:
    """Import a SillyTavern preset file (`file`); a preset with the kind and name of a stored
    one replaces it (same id, `replaced: true`)."""
    limits = import_limits(core)
    upload = await read_upload(request, limits)
    presets = await asyncio.to_thread(read_preset, upload.content, limits)
    async with core.session() as s:
        stored = await store_presets(s, presets)
        out = [{**repo.preset_json(p.preset, with_data=False), "replaced": p.replaced}
               for p in stored]
    return {"presets": out}


@router.post("/presets", status_code=201)
async def create_preset(body: PresetIn, who: Trusted, session: SessionDep) -> dict[str, Any]:
    stored = await store_preset(session, body.kind, body.name, body.data)
    return {**repo.preset_json(stored.preset), "replaced": stored.replaced}


@router.get("/presets")
async def list_presets(who: AnyUser, session: SessionDep, kind: Kind | None = None,
                       limit: int = Query(1000, ge=1, le=10_000),
                       offset: int = Query(0, ge=0, le=1_000_000_000)) -> dict[str, Any]:
    rows = await repo.list_presets(session, kind, limit=limit, offset=offset)
    return {"presets": [repo.preset_json(p, with_data=False) for p in rows]}


@router.get("/presets/{preset_id}")
async def get_preset(preset_id: str, who: AnyUser, session: SessionDep) -> dict[str, Any]:
    return repo.preset_json(await repo.get_preset(session, preset_id))


@router.patch("/presets/{preset_id}")
async def patch_preset(preset_id: str, body: PresetPatch, who: Trusted,
                       session: SessionDep) -> dict[str, Any]:
    p = await repo.get_preset(session, preset_id)
    data = dict(body.data if body.data is not None else p.data or {})
    name = body.name if body.name is not None else p.name
    if "name" in data or p.kind != "unknown":
        data["name"] = name
    validate_preset(p.kind, data)
    p.name, p.data = name, data
    await session.flush()
    return repo.preset_json(p)


@router.get("/presets/{preset_id}/export",
            responses={200: {"content": {"application/json": {}}}})
async def export_preset(preset_id: str, who: AnyUser, session: SessionDep) -> Response:
    """The preset as a SillyTavern JSON file."""
    p = await repo.get_preset(session, preset_id)
    return Response(content=write_preset(preset_file(p)), media_type="application/json",
                    headers=download_headers(p.name, "json"))


@router.delete("/presets/{preset_id}", status_code=204)
async def delete_preset(preset_id: str, who: Trusted, session: SessionDep) -> Response:
    await session.delete(await repo.get_preset(session, preset_id))
    return Response(status_code=204)
