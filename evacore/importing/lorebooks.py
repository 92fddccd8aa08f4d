"""Store a lorebook (`evacore.lore.model.Lorebook`) as rows and read it back.

Must not: parse files (formats/worldinfo.py does) or scan (lore/ does).
Rows: `lorebooks.data` = {description, scan_depth, token_budget, recursive_scanning,
extensions, extra}; one `lore_entries` row per entry whose `data` is the entry in
SillyTavern World Info form (what `write_world_info` writes and `read_world_info` reads).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from evacore.errors import ImportInvalid, NotFound
from evacore.formats.worldinfo import read_world_info, write_world_info
from evacore.importing._rows import INT32_MAX, column_text, ordered_ids
from evacore.lore.model import Lorebook
from evacore.store.tables import Lorebook as BookRow
from evacore.store.tables import LorebookLink
from evacore.store.tables import LoreEntry as EntryRow

LINK_KINDS = ("global", "chat", "character", "persona")
_BOOK_KEYS = ("description", "scan_depth", "token_budget", "recursive_scanning")


def _entries_form(book: Lorebook) -> dict[str, dict[str, Any]]:
    """Each entry in World Info form, keyed by uid (uids checked unique and storable)."""
    uids = [e.uid for e in book.entries]
    if len(set(uids)) != len(uids):
        raise ImportInvalid("the lorebook has two entries with the same uid")
    for uid in uids:
        if not -INT32_MAX <= uid <= INT32_MAX:
            raise ImportInvalid(f"lorebook entry uid {uid} is out of range")
    bare = Lorebook(entries=book.entries)
    return json.loads(write_world_info(bare))["entries"]


def book_level(book: Lorebook) -> dict[str, Any]:
    data: dict[str, Any] = {key: getattr(book, key) for key in _BOOK_KEYS}
    data["extensions"] = dict(book.extensions)
    data["extra"] = dict(book.extra)
    return data


async def store_lorebook(session: AsyncSession, book: Lorebook, *,
                         links: Iterable[tuple[str, str | None]] = ()) -> BookRow:
    """Insert the book, its entries and the given (target_kind, target_id) links."""
    entries = _entries_form(book)
    row = BookRow(name=column_text(book.name, 300) or "Lorebook", data=book_level(book))
    session.add(row)
    await session.flush()
    session.add_all(EntryRow(lorebook_id=row.id, uid=int(uid), data=data)
                    for uid, data in entries.items())
    link_list = list(links)
    for link_id, (kind, target) in zip(ordered_ids(len(link_list)), link_list, strict=True):
        if kind not in LINK_KINDS:
            raise ValueError(f"unknown lorebook link kind {kind!r}")
        session.add(LorebookLink(id=link_id, lorebook_id=row.id, target_kind=kind,
                                 target_id=target))
    await session.flush()
    return row


async def load_lorebook(session: AsyncSession, lorebook_id: str) -> Lorebook:
    """The stored book as the World Info engine's model (NotFound when absent)."""
    row = await session.get(BookRow, lorebook_id)
    if row is None:
        raise NotFound(f"lorebook {lorebook_id} not found")
    stmt = select(EntryRow).where(EntryRow.lorebook_id == row.id).order_by(EntryRow.uid)
    entries = {str(e.uid): e.data for e in (await session.scalars(stmt)).all()}
    parsed = read_world_info({"entries": entries})
    data = row.data or {}
    return dataclasses.replace(
        parsed, name=row.name,
        **{key: data.get(key) for key in _BOOK_KEYS},
        extensions=dict(data.get("extensions") or {}),
        extra=dict(data.get("extra") or {}),
    )


async def list_lorebooks(session: AsyncSession) -> list[BookRow]:
    return list((await session.scalars(select(BookRow).order_by(BookRow.name, BookRow.id))).all())


async def unlink_target(session: AsyncSession, target_kind: str, target_id: str) -> None:
    """Remove the target's links; books the target alone used (now linked nowhere) go too."""
    stmt = select(LorebookLink.lorebook_id).where(
        LorebookLink.target_kind == target_kind, LorebookLink.target_id == target_id)
    book_ids = list((await session.scalars(stmt)).all())
    await session.execute(delete(LorebookLink).where(
        LorebookLink.target_kind == target_kind, LorebookLink.target_id == target_id))
    for book_id in book_ids:
        remaining = await session.scalar(select(func.count()).select_from(LorebookLink)
                                         .where(LorebookLink.lorebook_id == book_id))
        if not remaining:
            await session.execute(delete(EntryRow).where(EntryRow.lorebook_id == book_id))
            await session.execute(delete(BookRow).where(BookRow.id == book_id))

