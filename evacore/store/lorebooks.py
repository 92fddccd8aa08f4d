"""Lorebooks as rows: save and load a `Lorebook`, edit its entries, link it to a chat, a
character, a persona or the global selection.

Must not: parse files (formats/worldinfo.py does) or scan (lore/ does).
Rows: `lorebooks.data` = {description, scan_depth, token_budget, recursive_scanning,
extensions, extra}; one `lore_entries` row per entry whose `data` is the entry in SillyTavern
World Info form (as `write_world_info` writes it), so fields we do not model survive.
Every change to a book or its entries moves the book's `updated_at` (caches key on it).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, delete, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from evacore.domain.ids import new_id, utcnow
from evacore.errors import Conflict, ImportInvalid, InvalidInput, NotFound
from evacore.formats.worldinfo import read_world_info, write_world_info
from evacore.lore.model import Lorebook, LoreEntry
from evacore.store import direct
from evacore.store.tables import Lorebook as BookRow
from evacore.store.tables import LorebookLink
from evacore.store.tables import LoreEntry as EntryRow

LINK_KINDS: tuple[str, ...] = ("global", "chat", "character", "persona")
BOOK_KEYS: tuple[str, ...] = ("description", "scan_depth", "token_budget", "recursive_scanning")
UID_MAX = 2**31 - 1
NAME_MAX = 300


# -- entries in World Info form -----------------------------------------------------------

def clean_json(value: Any, where: str = "value") -> Any:
    """A copy storable on every backend: NUL and lone surrogates become U+FFFD; NaN,
    infinities and integers beyond 64 bits are refused (InvalidInput)."""
    if isinstance(value, str):
        return _clean_text(value)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        if not -(2**63) <= value < 2**63:
            raise InvalidInput(f"{where}: the number {value} is too large")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInput(f"{where}: numbers must be finite")
        return value
    if isinstance(value, Mapping):
        return {_clean_text(str(k)): clean_json(v, where) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_json(v, where) for v in value]
    raise InvalidInput(f"{where}: {type(value).__name__} is not a JSON value")


def _clean_text(text: str) -> str:
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)
    return text


def entry_to_dict(entry: LoreEntry) -> dict[str, Any]:
    """One entry in World Info form (`key`, `keysecondary`, `ignoreBudget`, … and `uid`)."""
    doc = json.loads(write_world_info(Lorebook(entries=(entry,))))
    return doc["entries"][str(entry.uid)]


def entry_from_dict(data: Mapping[str, Any], uid: int) -> LoreEntry:
    """A World Info entry dict as a `LoreEntry` with this uid (ImportInvalid when malformed)."""
    check_uid(uid)
    book = read_world_info({"entries": {str(uid): dict(data)}})
    return book.entries[0]


def check_uid(uid: int) -> None:
    if isinstance(uid, bool) or not isinstance(uid, int) or not -UID_MAX <= uid <= UID_MAX:
        raise InvalidInput(f"an entry uid must be a whole number from {-UID_MAX} to {UID_MAX}")


def _canonical(entries: Sequence[LoreEntry]) -> dict[int, dict[str, Any]]:
    uids = [e.uid for e in entries]
    for uid in uids:
        check_uid(uid)
    if len(set(uids)) != len(uids):
        raise InvalidInput("two entries have the same uid")
    doc = json.loads(write_world_info(Lorebook(entries=tuple(entries))))
    return {int(k): clean_json(v, f"entry {k}") for k, v in doc["entries"].items()}


def book_data(book: Lorebook) -> dict[str, Any]:
    """The book-level fields stored in `lorebooks.data`."""
    data: dict[str, Any] = {key: getattr(book, key) for key in BOOK_KEYS}
    data["extensions"] = dict(book.extensions)
    data["extra"] = dict(book.extra)
    return clean_json(data, "lorebook")


def book_name(name: Any) -> str:
    """A name that fits its column (cleaned as `clean_json` does, cut to its length)."""
    text = name if isinstance(name, str) else ("" if name is None else str(name))
    return _clean_text(text)[:NAME_MAX]


# -- books --------------------------------------------------------------------------------

def touch(row: BookRow) -> None:
    """Mark the book changed (entries live in other rows)."""
    row.updated_at = utcnow()


async def save_lorebook(session: AsyncSession, book: Lorebook, *, name: str | None = None,
                        links: Iterable[tuple[str, str | None]] = ()) -> BookRow:
    """Insert the book, its entries and (target_kind, target_id) links; returns the book row."""
    entries = _canonical(book.entries)
    row = BookRow(name=book_name(name if name is not None else book.name) or "Lorebook",
                  data=book_data(book))
    session.add(row)
    await session.flush()
    session.add_all(EntryRow(lorebook_id=row.id, uid=uid, data=data)
                    for uid, data in entries.items())
    for kind, target in links:
        await add_link(session, row.id, kind, target)
    await session.flush()
    return row


async def get_book_row(session: AsyncSession, lorebook_id: str, *,
                       for_write: bool = False) -> BookRow:
    """The book's row. `for_write`: the book is locked for the rest of the transaction
    first (PostgreSQL: its row; SQLite: the write lock, taken by touching the row), so
    concurrent edits of one book and its entries run one after another instead of
    working on rows another edit has just replaced."""
    if not for_write:
        row = await session.get(BookRow, lorebook_id)
    elif session.get_bind().dialect.name == "postgresql":
        row = await session.scalar(select(BookRow).where(BookRow.id == lorebook_id)
                                   .with_for_update().execution_options(populate_existing=True))
    else:
        await session.execute(update(BookRow).where(BookRow.id == lorebook_id)
                              .values(updated_at=utcnow())
                              .execution_options(synchronize_session=False))
        row = await session.get(BookRow, lorebook_id, populate_existing=True)
    if row is None:
        raise NotFound(f"lorebook {lorebook_id} not found")
    return row


def book_from_rows(row: BookRow, entries: Iterable[EntryRow], *,
                   problems: list[dict[str, Any]] | None = None) -> Lorebook:
    """Rows → `Lorebook`. A malformed stored entry raises ImportInvalid, or, when `problems`
    is given, is left out and described there."""
    stored = {str(e.uid): e.data or {} for e in entries}
    try:
        parsed = read_world_info({"entries": stored}).entries
    except ImportInvalid:
        if problems is None:
            raise
        kept = []
        for uid, data in stored.items():
            try:
                kept.extend(read_world_info({"entries": {uid: data}}).entries)
            except ImportInvalid as exc:
                problems.append({"book": row.id, "name": row.name, "uid": int(uid),
                                 "error": exc.message})
        parsed = tuple(kept)
    data = row.data or {}
    fields: dict[str, Any] = {}
    for key, kind in (("scan_depth", int), ("token_budget", int),
                      ("recursive_scanning", bool), ("description", str)):
        value = data.get(key)
        wrong = isinstance(value, bool) and kind is int
        fields[key] = value if isinstance(value, kind) and not wrong else None
    return Lorebook(
        name=row.name, entries=parsed, **fields,
        extensions=dict(data.get("extensions") or {}), extra=dict(data.get("extra") or {}),
    )


async def load_lorebook(session: AsyncSession, lorebook_id: str) -> Lorebook:
    """The stored book as the engine's model (NotFound when absent)."""
    row = await get_book_row(session, lorebook_id)
    return book_from_rows(row, await entry_rows(session, row.id))


async def entry_rows(session: AsyncSession, lorebook_id: str) -> list[EntryRow]:
    stmt = select(EntryRow).where(EntryRow.lorebook_id == lorebook_id).order_by(EntryRow.uid)
    return list((await session.scalars(stmt)).all())


async def entry_rows_of(session: AsyncSession, ids: Sequence[str]) -> dict[str, list[EntryRow]]:
    """Entry rows of several books in one query, by book id, each list by uid."""
    out: dict[str, list[EntryRow]] = {i: [] for i in ids}
    if not ids:
        return out
    stmt = select(EntryRow).where(EntryRow.lorebook_id.in_(list(ids))).order_by(EntryRow.uid)
    for row in (await session.scalars(stmt)).all():
        out[row.lorebook_id].append(row)
    return out


async def list_lorebooks(session: AsyncSession) -> list[BookRow]:
    return list((await session.scalars(select(BookRow).order_by(BookRow.name, BookRow.id))).all())


async def entry_counts(session: AsyncSession, ids: Sequence[str]) -> dict[str, int]:
    if not ids:
        return {}
    stmt = (select(EntryRow.lorebook_id, func.count()).where(EntryRow.lorebook_id.in_(list(ids)))
            .group_by(EntryRow.lorebook_id))
    return {k: int(v) for k, v in (await session.execute(stmt)).all()}


async def update_book(session: AsyncSession, row: BookRow, changes: Mapping[str, Any]) -> None:
    """Set `name` and/or book-level fields (`None` clears one)."""
    if "name" in changes and changes["name"] is not None:
        row.name = book_name(changes["name"]) or row.name
    data = dict(row.data or {})
    for key in BOOK_KEYS:
        if key in changes:
            data[key] = clean_json(changes[key], key)
    row.data = data
    touch(row)
    await session.flush()


async def replace_entries(session: AsyncSession, row: BookRow, entries: Sequence[LoreEntry]) -> None:
    stored = _canonical(entries)
    await session.execute(delete(EntryRow).where(EntryRow.lorebook_id == row.id))
    session.add_all(EntryRow(lorebook_id=row.id, uid=uid, data=data) for uid, data in stored.items())
    touch(row)
    await session.flush()


async def delete_lorebook(session: AsyncSession, lorebook_id: str) -> None:
    row = await get_book_row(session, lorebook_id, for_write=True)
    await session.execute(delete(LorebookLink).where(LorebookLink.lorebook_id == row.id))
    await session.execute(delete(EntryRow).where(EntryRow.lorebook_id == row.id))
    await session.delete(row)
    await session.flush()


# -- single entries -----------------------------------------------------------------------

async def get_entry_row(session: AsyncSession, row: BookRow, uid: int) -> EntryRow:
    found = await session.scalar(select(EntryRow).where(EntryRow.lorebook_id == row.id,
                                                        EntryRow.uid == uid))
    if found is None:
        raise NotFound(f"lorebook {row.id} has no entry {uid}")
    return found


async def next_uid(session: AsyncSession, row: BookRow) -> int:
    top = await session.scalar(select(func.max(EntryRow.uid)).where(EntryRow.lorebook_id == row.id))
    uid = 0 if top is None else int(top) + 1
    check_uid(uid)
    return uid


async def add_entry(session: AsyncSession, row: BookRow, entry: LoreEntry) -> dict[str, Any]:
    """Insert one entry (Conflict when its uid is taken); returns its World Info form."""
    data = _canonical([entry])[entry.uid]
    taken = await session.scalar(select(EntryRow.id).where(EntryRow.lorebook_id == row.id,
                                                           EntryRow.uid == entry.uid))
    if taken is not None:
        raise Conflict(f"lorebook {row.id} already has an entry {entry.uid}")
    session.add(EntryRow(lorebook_id=row.id, uid=entry.uid, data=data))
    touch(row)
    await session.flush()
    return data


async def put_entry(session: AsyncSession, row: BookRow, entry_row: EntryRow,
                    entry: LoreEntry) -> dict[str, Any]:
    """Replace a stored entry (same uid); returns its World Info form."""
    data = _canonical([dataclasses.replace(entry, uid=entry_row.uid)])[entry_row.uid]
    entry_row.data = data
    touch(row)
    await session.flush()
    return data


async def delete_entry(session: AsyncSession, row: BookRow, uid: int) -> None:
    await session.delete(await get_entry_row(session, row, uid))
    touch(row)
    await session.flush()


# -- links --------------------------------------------------------------------------------

def _link_filter(lorebook_id: str, kind: str, target_id: str | None) -> Any:
    target = (LorebookLink.target_id.is_(None) if target_id is None
              else LorebookLink.target_id == target_id)
    return (LorebookLink.lorebook_id == lorebook_id) & (LorebookLink.target_kind == kind) & target


async def add_link(session: AsyncSession, lorebook_id: str, kind: str,
                   target_id: str | None) -> LorebookLink:
    """Link a book to a target (idempotent); `global` links have no target id."""
    if kind not in LINK_KINDS:
        raise InvalidInput(f"target_kind must be one of {', '.join(LINK_KINDS)}")
    if (kind == "global") != (target_id is None):
        raise InvalidInput("a global link has no target_id; other links need one")
    found = await session.scalar(select(LorebookLink).where(_link_filter(lorebook_id, kind,
                                                                         target_id)))
    if found is not None:
        return found
    link = LorebookLink(id=new_id(), lorebook_id=lorebook_id, target_kind=kind,
                        target_id=target_id)
    session.add(link)
    await session.flush()
    return link


async def remove_link(session: AsyncSession, lorebook_id: str, kind: str,
                      target_id: str | None) -> None:
    found = await session.scalar(select(LorebookLink).where(_link_filter(lorebook_id, kind,
                                                                         target_id)))
    if found is None:
        raise NotFound("no such link")
    await session.delete(found)
    await session.flush()


async def links_of(session: AsyncSession, ids: Sequence[str]) -> dict[str, list[LorebookLink]]:
    out: dict[str, list[LorebookLink]] = {i: [] for i in ids}
    if not ids:
        return out
    stmt = (select(LorebookLink).where(LorebookLink.lorebook_id.in_(list(ids)))
            .order_by(LorebookLink.id))
    for link in (await session.scalars(stmt)).all():
        out[link.lorebook_id].append(link)
    return out


def link_json(link: LorebookLink) -> dict[str, Any]:
    return {"target_kind": link.target_kind, "target_id": link.target_id}


def _link_to(kind: str) -> Any:
    return (LorebookLink.target_kind == kind) & (LorebookLink.target_id == bindparam(kind))


_LINKED_BOOKS = (
    select(LorebookLink.lorebook_id, LorebookLink.target_kind, BookRow.name, BookRow.updated_at)
    .join(BookRow, BookRow.id == LorebookLink.lorebook_id)
    .where(or_(LorebookLink.target_kind == "global", _link_to("chat"), _link_to("character"),
               _link_to("persona")))
    .order_by(LorebookLink.id))
"""Built once: a target that is absent is matched as NULL, which no link's target equals."""


async def linked_books(session: AsyncSession, *, chat_id: str | None, character_id: str | None,
                       persona_id: str | None) -> list[tuple[str, str, str, datetime]]:
    """(book id, source, name, updated_at) of every book linked to these targets or globally,
    links in creation order."""
    rows = await direct.execute(session, _LINKED_BOOKS, {
        "chat": chat_id or None, "character": character_id or None,
        "persona": persona_id or None})
    return [(a, b, c, d) for a, b, c, d in rows]


async def unlink_target(session: AsyncSession, kind: str, target_id: str, *,
                        drop_orphans: bool) -> list[str]:
    """Remove every link to a target (a deleted chat, character or persona); with
    `drop_orphans`, books now linked nowhere are deleted too (a card's own book). Returns
    the ids of the books that were linked."""
    stmt = select(LorebookLink.lorebook_id).where(LorebookLink.target_kind == kind,
                                                  LorebookLink.target_id == target_id)
    book_ids = list(dict.fromkeys((await session.scalars(stmt)).all()))
    await session.execute(delete(LorebookLink).where(LorebookLink.target_kind == kind,
                                                     LorebookLink.target_id == target_id))
    if drop_orphans:
        for book_id in book_ids:
            left = await session.scalar(select(func.count()).select_from(LorebookLink)
                                        .where(LorebookLink.lorebook_id == book_id))
            if not left:
                await session.execute(delete(EntryRow).where(EntryRow.lorebook_id == book_id))
                await session.execute(delete(BookRow).where(BookRow.id == book_id))
    await session.flush()
    return book_ids
