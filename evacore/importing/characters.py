"""Store a character card (with its assets and embedded book) as rows, and rebuild it for export.

Must not: parse or write card bytes itself (formats/cards.py does) or speak HTTP.
The card's `character_book` becomes a lorebook linked to the character; an export embeds
the character's first linked lorebook again.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlalchemy import delete
from sqlalchemy.ext.asyncio import AsyncSession

from evacore.domain.ids import new_id
from evacore.errors import ImportInvalid, InvalidInput
from evacore.formats.cards import (
    Card,
    CardAsset,
    parse_card_object,
    write_charx,
    write_json,
    write_png,
)
from evacore.formats.worldinfo import from_character_book, to_character_book
from evacore.importing._rows import checked_name, column_text, ordered_ids
from evacore.lore.model import Lorebook
from evacore.memory.forget import forget_scope
from evacore.store import characters as repo
from evacore.store.lorebooks import load_lorebook, save_lorebook
from evacore.store.tables import Character, CharacterAsset, LorebookLink

ExportFormat = Literal["png", "json", "charx"]
EXPORT_MEDIA: dict[str, tuple[str, str]] = {
    "png": ("image/png", "png"),
    "json": ("application/json", "json"),
    "charx": ("application/zip", "charx"),
}
NOT_EDITABLE = ("character_book", "assets")


@dataclass
class StoredCharacter:
    character: Character
    lorebook_id: str | None = None
    warnings: list[str] = field(default_factory=list)


def split_book(card: Card) -> tuple[dict[str, Any], Lorebook | None]:
    """The card data without `character_book`, and that book as a Lorebook (named after
    the character when it has no name, as SillyTavern does)."""
    data = dict(card.data)
    raw = data.pop("character_book", None)
    if raw is None:
        return data, None
    book = from_character_book(raw)
    if not book.name:
        book = dataclasses.replace(book, name=f"{card.name or 'Character'}'s Lorebook")
    return data, book


def _asset_rows(card: Card, character_id: str) -> list[CharacterAsset]:
    rows: list[CharacterAsset] = []
    files = list(card.extra_files.items())
    ids = ordered_ids(len(card.assets) + len(files))
    for row_id, asset in zip(ids, card.assets, strict=False):
        default = asset.uri.lower().startswith("ccdefault:")
        rows.append(CharacterAsset(
            id=row_id, character_id=character_id,
            name=checked_name(asset.name, 300, "an asset name"),
            type=checked_name(asset.type, 64, f"the type of asset {asset.name!r}"),
            ext=checked_name(asset.ext, 32, f"the ext of asset {asset.name!r}"),
            uri=checked_name(asset.uri, 10_000_000, f"the uri of asset {asset.name!r}"),
            data=None if default else asset.data,
        ))
    for row_id, (path, payload) in zip(ids[len(card.assets):], files, strict=True):
        rows.append(CharacterAsset(
            id=row_id, character_id=character_id, name=column_text(path, 300),
            type=repo.EXTRA_FILE_TYPE, ext="", uri=checked_name(path, 10_000, "an archive path"),
            data=payload,
        ))
    return rows


async def store_card(session: AsyncSession, card: Card) -> StoredCharacter:
    """Insert a character row, its asset rows and its book (as a linked lorebook)."""
    data, book = split_book(card)
    character = Character(
        id=new_id(), name=column_text(card.name, 300) or "Unnamed", spec=card.spec, data=data,
        extra_top=dict(card.extra_top), image=card.image,
    )
    session.add(character)
    session.add_all(_asset_rows(card, character.id))
    await session.flush()
    stored = StoredCharacter(character, warnings=list(card.warnings))
    if book is not None:
        row = await save_lorebook(session, book, links=[("character", character.id)])
        stored.lorebook_id = row.id
    return stored


async def load_card(session: AsyncSession, character: Character) -> Card:
    """The stored character as a Card: assets with bytes, archive extras, book embedded."""
    rows = await repo.assets_of(session, character.id)
    assets = [r for r in rows if r.type != repo.EXTRA_FILE_TYPE]
    other_icon = any(r.type == "icon" and r.data is not None for r in assets)
    card_assets = []
    for r in assets:
        payload = r.data
        if payload is None and r.uri.lower().startswith("ccdefault:") and not other_icon:
            payload = character.image
        card_assets.append(CardAsset(name=r.name, type=r.type, ext=r.ext, uri=r.uri,
                                     data=payload))
    data = dict(character.data or {})
    book_ids = await repo.lorebook_ids_of(session, character.id)
    if book_ids:
        data["character_book"] = to_character_book(await load_lorebook(session, book_ids[0]))
    return Card(
        spec=character.spec, data=data, extra_top=dict(character.extra_top or {}),
        image=character.image, assets=card_assets,
        extra_files={r.uri: r.data or b"" for r in rows if r.type == repo.EXTRA_FILE_TYPE},
    )


async def forget_character(session: AsyncSession, character: Character) -> None:
    """Delete the character with its assets, lorebook links, memory blocks and documents. Its
    books stay (unlinked, as SillyTavern keeps a world file when a character goes); chats
    fall back to the default."""
    await session.execute(delete(LorebookLink).where(
        LorebookLink.target_kind == "character", LorebookLink.target_id == character.id))
    await forget_scope(session, "character", character.id)
    await repo.delete_character(session, character)


def export_card(card: Card, fmt: str) -> tuple[bytes, str, str]:
    """(file bytes, media type, file extension) for `png`, `json` or `charx`."""
    if fmt not in EXPORT_MEDIA:
        raise InvalidInput("format must be png, json or charx")
    media, ext = EXPORT_MEDIA[fmt]
    writer = {"png": write_png, "json": write_json, "charx": write_charx}[fmt]
    return writer(card), media, ext


def apply_edit(character: Character, changes: dict[str, Any]) -> None:
    """Apply card field `changes` to the character, validated and normalised as a V3 card
    (ImportInvalid names the bad field); `modification_date` is stamped."""
    for key in NOT_EDITABLE:
        if key in changes:
            raise InvalidInput(f"'{key}' cannot be edited here"
                               + ("; edit the linked lorebook" if key == "character_book" else ""))
    merged = {**(character.data or {}), **changes, "modification_date": int(time.time())}
    card = parse_card_object({"spec": "chara_card_v3", "spec_version": "3.0", "data": merged})
    data = dict(card.data)
    data.pop("character_book", None)
    data.pop("assets", None)
    if "name" in changes and not str(data.get("name") or "").strip():
        raise ImportInvalid("a character needs a non-empty 'name'")
    character.data = data
    character.name = column_text(data.get("name"), 300) or "Unnamed"
