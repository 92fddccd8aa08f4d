"""Characters and their assets: read, list (without image bytes), delete; the public JSON shapes.

Must not: parse or write card files (formats/) or decide how a card is split into rows
(importing/characters.py does).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import defer

from evacore.errors import NotFound
from evacore.store.tables import Character, CharacterAsset, LorebookLink

EXTRA_FILE_TYPE = "x-evacore-archive-file"
"""`character_assets.type` of a CHARX entry that no asset names (kept so an export loses nothing)."""


async def get_character(session: AsyncSession, character_id: str) -> Character:
    character = await session.get(Character, character_id)
    if character is None:
        raise NotFound(f"character {character_id} not found")
    return character


async def list_characters(session: AsyncSession, *, limit: int = 100,
                          offset: int = 0) -> list[Character]:
    """Characters by name, image bytes left unloaded."""
    stmt = (select(Character).options(defer(Character.image))
            .order_by(Character.name, Character.id).offset(offset).limit(limit))
    return list((await session.scalars(stmt)).all())


async def count_characters(session: AsyncSession) -> int:
    return int(await session.scalar(select(func.count()).select_from(Character)) or 0)


async def find_by_name(session: AsyncSession, name: str) -> list[Character]:
    stmt = select(Character).options(defer(Character.image)).where(Character.name == name)
    return list((await session.scalars(stmt)).all())


async def assets_of(session: AsyncSession, character_id: str) -> list[CharacterAsset]:
    """A character's asset rows in card order (ids are assigned in order at import)."""
    stmt = (select(CharacterAsset).where(CharacterAsset.character_id == character_id)
            .order_by(CharacterAsset.id))
    return list((await session.scalars(stmt)).all())


async def lorebook_ids_of(session: AsyncSession, character_id: str) -> list[str]:
    """Lorebooks linked to the character, oldest link first (the first is the card's book)."""
    stmt = (select(LorebookLink.lorebook_id)
            .where(LorebookLink.target_kind == "character",
                   LorebookLink.target_id == character_id)
            .order_by(LorebookLink.id))
    return list((await session.scalars(stmt)).all())


async def delete_character(session: AsyncSession, character: Character) -> None:
    """Delete the row (assets cascade, chats fall back to the default character)."""
    await session.execute(delete(CharacterAsset).where(
        CharacterAsset.character_id == character.id))
    await session.delete(character)
    await session.flush()


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def character_summary(c: Character) -> dict[str, Any]:
    """The list shape: no card text beyond tags and creator, never image bytes."""
    data = c.data or {}
    tags = data.get("tags")
    return {
        "id": c.id,
        "name": c.name,
        "spec": c.spec,
        "tags": list(tags) if isinstance(tags, list) else [],
        "creator": data.get("creator") or "",
        "created_at": _iso(c.created_at),
        "updated_at": _iso(c.updated_at),
    }


def asset_json(a: CharacterAsset) -> dict[str, Any]:
    return {"id": a.id, "name": a.name, "type": a.type, "ext": a.ext, "uri": a.uri,
            "size": len(a.data) if a.data is not None else None}


def character_json(c: Character, assets: list[CharacterAsset],
                   lorebook_ids: list[str]) -> dict[str, Any]:
    """The full shape: V3 `data` (the card book lives in the linked lorebook), extra top keys,
    assets without bytes, linked lorebook ids."""
    out = character_summary(c)
    out.update(
        data=c.data or {},
        extra_top=c.extra_top or {},
        assets=[asset_json(a) for a in assets if a.type != EXTRA_FILE_TYPE],
        lorebook_ids=lorebook_ids,
        has_image=c.image is not None,
    )
    return out
