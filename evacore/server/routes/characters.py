"""`/v1/characters` (R8.2, R2.3): import a card (JSON body or PNG/JSON/CHARX upload), list,
read, edit, delete, export as PNG/JSON/CHARX, and the avatar image.

Must not: parse cards (formats/) or split them into rows (importing/). Any user reads;
importing, editing and deleting need a trusted user or the master.
A failed import stores nothing: the file is parsed before the one write transaction.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, ConfigDict

from evacore.errors import NotFound
from evacore.formats.cards import read_card
from evacore.importing.characters import (
    apply_edit,
    export_card,
    forget_character,
    load_card,
    store_card,
)
from evacore.importing.upload import download_headers, import_limits, read_upload, upload_body
from evacore.server.auth import AnyUser, Trusted
from evacore.server.deps import CoreDep, SessionDep
from evacore.store import characters as repo

router = APIRouter(tags=["characters"])

_IMAGE_TYPES = ((b"\x89PNG", "image/png"), (b"\xff\xd8\xff", "image/jpeg"),
                (b"GIF8", "image/gif"))


class CharacterPatch(BaseModel):
    """Card fields to change (merged into `data`, validated as a V3 card) and top-level keys."""

    model_config = ConfigDict(extra="forbid")
    data: dict[str, Any] | None = None
    extra_top: dict[str, Any] | None = None


@router.post("/characters", status_code=201, openapi_extra=upload_body(json_body=True))
async def import_character(request: Request, who: Trusted, core: CoreDep) -> dict[str, Any]:
    """Import a card: an `application/json` body, or a `multipart/form-data` `file` (PNG,
    JSON or CHARX). 413 past the size limit, 415 for another kind of file, 422 malformed."""
    limits = import_limits(core)
    upload = await read_upload(request, limits, json_body=True)
    card = await asyncio.to_thread(read_card, upload.content, upload.filename, limits)
    async with core.session() as s:
        stored = await store_card(s, card)
        assets = await repo.assets_of(s, stored.character.id)
        books = [stored.lorebook_id] if stored.lorebook_id else []
        body = repo.character_json(stored.character, assets, books)
    body.update(lorebook_id=stored.lorebook_id, warnings=stored.warnings)
    return body


@router.get("/characters")
async def list_characters(
    who: AnyUser, session: SessionDep, limit: int = Query(100, ge=1, le=1000),
    offset: int = Query(0, ge=0, le=1_000_000_000),
) -> dict[str, Any]:
    rows = await repo.list_characters(session, limit=limit, offset=offset)
    return {"characters": [repo.character_summary(c) for c in rows],
            "total": await repo.count_characters(session)}


@router.get("/characters/{character_id}")
async def get_character(character_id: str, who: AnyUser, session: SessionDep) -> dict[str, Any]:
    c = await repo.get_character(session, character_id)
    return repo.character_json(c, await repo.assets_of(session, c.id),
                               await repo.lorebook_ids_of(session, c.id))


@router.patch("/characters/{character_id}")
async def patch_character(character_id: str, body: CharacterPatch, who: Trusted,
                          session: SessionDep) -> dict[str, Any]:
    """Change card fields; the result must still be a valid card (422 names the field)."""
    c = await repo.get_character(session, character_id)
    if body.data is not None:
        apply_edit(c, body.data)
    if body.extra_top is not None:
        c.extra_top = body.extra_top
    await session.flush()
    return repo.character_json(c, await repo.assets_of(session, c.id),
                               await repo.lorebook_ids_of(session, c.id))


@router.delete("/characters/{character_id}", status_code=204)
async def delete_character(character_id: str, who: Trusted, session: SessionDep) -> Response:
    """Delete the character and its assets; its lorebooks stay (unlinked) and its chats stay,
    talking to the default character."""
    c = await repo.get_character(session, character_id)
    await forget_character(session, c)
    return Response(status_code=204)


@router.get("/characters/{character_id}/export",
            responses={200: {"content": {"image/png": {}, "application/json": {},
                                         "application/zip": {}}}})
async def export_character(
    character_id: str, who: AnyUser, session: SessionDep,
    format: Literal["png", "json", "charx"] = Query("png"),
) -> Response:
    """The card file: PNG (`chara` V2 + `ccv3` V3 chunks), V3 JSON or CHARX."""
    c = await repo.get_character(session, character_id)
    card = await load_card(session, c)
    data, media, ext = await asyncio.to_thread(export_card, card, format)
    return Response(content=data, media_type=media, headers=download_headers(c.name, ext))


@router.get("/characters/{character_id}/avatar",
            responses={200: {"content": {"image/png": {}, "image/jpeg": {}}}})
async def character_avatar(character_id: str, who: AnyUser, session: SessionDep) -> Response:
    c = await repo.get_character(session, character_id)
    if not c.image:
        raise NotFound(f"character {character_id} has no image")
    media = next((m for magic, m in _IMAGE_TYPES if c.image.startswith(magic)), None)
    if media is None and c.image[:4] == b"RIFF" and c.image[8:12] == b"WEBP":
        media = "image/webp"
    return Response(content=c.image, media_type=media or "application/octet-stream")
