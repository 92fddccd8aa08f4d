"""`/v1/lorebooks` (R8.2, R2.4): books and their entries in SillyTavern World Info form, import
and export of World Info files, and links to a chat, a character, a persona or every chat.

Must not: parse files (formats/worldinfo.py) or scan (lore/). Any user reads; writing needs a
trusted user or the master; a `global` link (it reaches every chat) needs the master.
Bad input → 422, an oversized body → 413, nothing half-written.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Request, Response
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool
from sqlalchemy.ext.asyncio import AsyncSession

from evacore.errors import Forbidden, InvalidInput, NotFound, TooLarge
from evacore.formats.limits import DEFAULT_LIMITS, Limits
from evacore.formats.worldinfo import load_world_info_file, read_world_info, write_world_info
from evacore.importing.upload import download_headers, import_limits, read_upload, upload_body
from evacore.lore.model import Lorebook, LoreEntry
from evacore.server.auth import AnyUser, Identity, Trusted
from evacore.server.deps import CoreDep, SessionDep
from evacore.store import lorebooks as repo
from evacore.store.tables import Character, Chat, Persona
from evacore.store.tables import Lorebook as BookRow

router = APIRouter(tags=["lorebooks"])

MAX_BODY_BYTES = 16 * 1024 * 1024
MAX_ENTRIES = DEFAULT_LIMITS.max_lore_entries


async def _body_cap(request: Request) -> None:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise TooLarge(f"the body is larger than {MAX_BODY_BYTES} bytes", limit=MAX_BODY_BYTES)


Capped = Depends(_body_cap)


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain a NUL character")
    return value


Name = Annotated[str, Field(min_length=1, max_length=repo.NAME_MAX), AfterValidator(_no_nul)]
Entries = list[dict[str, Any]] | dict[str, dict[str, Any]]
Uid = Annotated[int, Path(ge=-repo.UID_MAX, le=repo.UID_MAX)]


class LorebookIn(BaseModel):
    """A new book; `entries` in World Info form (a list, or an object keyed by uid)."""

    model_config = ConfigDict(extra="forbid")
    name: Name
    description: str | None = Field(default=None, max_length=1_000_000)
    scan_depth: int | None = Field(default=None, ge=0, le=1000)
    token_budget: int | None = Field(default=None, ge=0, le=10**9)
    recursive_scanning: StrictBool | None = None
    extensions: dict[str, Any] = Field(default_factory=dict)
    entries: Entries = Field(default_factory=list)


class LorebookPatch(BaseModel):
    """Book fields to change (`null` clears one); `entries` replaces every entry."""

    model_config = ConfigDict(extra="forbid")
    name: Name | None = None
    description: str | None = Field(default=None, max_length=1_000_000)
    scan_depth: int | None = Field(default=None, ge=0, le=1000)
    token_budget: int | None = Field(default=None, ge=0, le=10**9)
    recursive_scanning: StrictBool | None = None
    entries: Entries | None = None


class LinkIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    target_kind: Literal["global", "chat", "character", "persona"]
    target_id: str | None = Field(default=None, min_length=1, max_length=32)


# -- shapes -------------------------------------------------------------------------------

def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _summary(row: BookRow, count: int, links: list[Any]) -> dict[str, Any]:
    data = row.data or {}
    return {
        "id": row.id, "name": row.name,
        **{key: data.get(key) for key in repo.BOOK_KEYS},
        "extensions": data.get("extensions") or {},
        "entries": count, "links": [repo.link_json(link) for link in links],
        "created_at": _iso(row.created_at), "updated_at": _iso(row.updated_at),
    }


async def _full(session: AsyncSession, row: BookRow) -> dict[str, Any]:
    entries = await repo.entry_rows(session, row.id)
    links = (await repo.links_of(session, [row.id]))[row.id]
    out = _summary(row, len(entries), links)
    out["entry_count"] = len(entries)
    out["entries"] = [{**(e.data or {}), "uid": e.uid} for e in entries]
    return out


# -- entries from the request -------------------------------------------------------------

def _uid_of(value: Any) -> int:
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput("an entry uid must be a whole number")
    repo.check_uid(value)
    return value


def _entries(raw: Entries) -> list[LoreEntry]:
    """Request entries → LoreEntry list; a missing uid gets the next free one."""
    items = list(raw.items()) if isinstance(raw, dict) else [(None, e) for e in raw]
    if len(items) > MAX_ENTRIES:
        raise TooLarge(f"a lorebook holds at most {MAX_ENTRIES} entries", limit=MAX_ENTRIES)
    uids: list[int | None] = []
    for key, data in items:
        given = data.get("uid") if key is None else key
        uids.append(None if given is None else _uid_of(given))
    taken = {u for u in uids if u is not None}
    free = 0
    out = []
    for (_, data), uid in zip(items, uids, strict=True):
        if uid is None:
            while free in taken:
                free += 1
            uid = free
            taken.add(uid)
        out.append(_entry(data, uid))
    return out


def _entry(data: dict[str, Any], uid: int) -> LoreEntry:
    clean = repo.clean_json(data, f"entry {uid}")
    clean.pop("uid", None)
    return repo.entry_from_dict(clean, uid)


# -- books --------------------------------------------------------------------------------

@router.post("/lorebooks", status_code=201, dependencies=[Capped])
async def create_lorebook(body: LorebookIn, who: Trusted, session: SessionDep) -> dict[str, Any]:
    book = Lorebook(
        name=body.name, entries=tuple(_entries(body.entries)), description=body.description,
        scan_depth=body.scan_depth, token_budget=body.token_budget,
        recursive_scanning=body.recursive_scanning,
        extensions=repo.clean_json(body.extensions, "extensions"),
    )
    row = await repo.save_lorebook(session, book)
    return await _full(session, row)


@router.get("/lorebooks")
async def list_lorebooks(who: AnyUser, session: SessionDep) -> dict[str, Any]:
    rows = await repo.list_lorebooks(session)
    ids = [r.id for r in rows]
    counts = await repo.entry_counts(session, ids)
    links = await repo.links_of(session, ids)
    return {"lorebooks": [_summary(r, counts.get(r.id, 0), links[r.id]) for r in rows]}


@router.get("/lorebooks/{lorebook_id}")
async def get_lorebook(lorebook_id: str, who: AnyUser, session: SessionDep) -> dict[str, Any]:
    return await _full(session, await repo.get_book_row(session, lorebook_id))


@router.patch("/lorebooks/{lorebook_id}", dependencies=[Capped])
async def patch_lorebook(lorebook_id: str, body: LorebookPatch, who: Trusted,
                         session: SessionDep) -> dict[str, Any]:
    row = await repo.get_book_row(session, lorebook_id, for_write=True)
    changes = {k: getattr(body, k) for k in body.model_fields_set if k != "entries"}
    if "name" in changes and changes["name"] is None:
        raise InvalidInput("name: a lorebook needs a name")
    if body.entries is not None:
        await repo.replace_entries(session, row, _entries(body.entries))
    await repo.update_book(session, row, changes)
    return await _full(session, row)


@router.delete("/lorebooks/{lorebook_id}", status_code=204)
async def delete_lorebook(lorebook_id: str, who: Trusted, session: SessionDep) -> Response:
    await repo.delete_lorebook(session, lorebook_id)
    return Response(status_code=204)


# -- entries ------------------------------------------------------------------------------

@router.post("/lorebooks/{lorebook_id}/entries", status_code=201, dependencies=[Capped])
async def add_entry(lorebook_id: str, body: dict[str, Any], who: Trusted,
                    session: SessionDep) -> dict[str, Any]:
    """One entry in World Info form; without `uid` it gets the next free one."""
    row = await repo.get_book_row(session, lorebook_id, for_write=True)
    uid = _uid_of(body["uid"]) if body.get("uid") is not None else await repo.next_uid(session, row)
    data = await repo.add_entry(session, row, _entry(body, uid))
    return {**data, "uid": uid}


@router.get("/lorebooks/{lorebook_id}/entries/{uid}")
async def get_entry(lorebook_id: str, uid: Uid, who: AnyUser, session: SessionDep) -> dict[str, Any]:
    row = await repo.get_book_row(session, lorebook_id)
    entry = await repo.get_entry_row(session, row, uid)
    return {**(entry.data or {}), "uid": entry.uid}


@router.patch("/lorebooks/{lorebook_id}/entries/{uid}", dependencies=[Capped])
async def patch_entry(lorebook_id: str, uid: Uid, body: dict[str, Any], who: Trusted,
                      session: SessionDep) -> dict[str, Any]:
    """World Info fields to change, merged over the stored entry; `uid` cannot change."""
    row = await repo.get_book_row(session, lorebook_id, for_write=True)
    entry_row = await repo.get_entry_row(session, row, uid)
    if body.get("uid") is not None and _uid_of(body["uid"]) != uid:
        raise InvalidInput("an entry's uid cannot change; add a new entry instead")
    merged = {**(entry_row.data or {}), **body}
    data = await repo.put_entry(session, row, entry_row, _entry(merged, uid))
    return {**data, "uid": uid}


@router.delete("/lorebooks/{lorebook_id}/entries/{uid}", status_code=204)
async def delete_entry(lorebook_id: str, uid: Uid, who: Trusted, session: SessionDep) -> Response:
    row = await repo.get_book_row(session, lorebook_id, for_write=True)
    await repo.delete_entry(session, row, uid)
    return Response(status_code=204)


# -- import / export ----------------------------------------------------------------------

def _parse(data: bytes, name: str | None, filename: str | None, limits: Limits) -> Lorebook:
    """The book in the file; its entries are counted before it is parsed (413 past the cap)."""
    obj = load_world_info_file(data, limits)
    book = read_world_info(obj, name=name or None)
    if not book.name:
        stem = (filename or "").rsplit("/", 1)[-1].rsplit(".", 1)[0]
        book = read_world_info(obj, name=stem or "Imported lorebook")
    return book


def _import_body() -> dict[str, Any]:
    """The upload schema, closed: a form carries `file` and `name`, nothing else."""
    extra = upload_body(json_body=True, fields={"name": {"type": "string"}})
    extra["requestBody"]["content"]["multipart/form-data"]["schema"]["additionalProperties"] = False
    return extra


@router.post("/lorebooks/import", status_code=201, openapi_extra=_import_body())
async def import_lorebook(request: Request, who: Trusted, core: CoreDep) -> dict[str, Any]:
    """A World Info file, a `lorebook_v3` object or a card's `character_book`: a multipart
    `file` (optional field `name`) or a JSON body. 413 past the size limit, 422 malformed."""
    limits = import_limits(core)
    upload = await read_upload(request, limits, json_body=True, max_bytes=limits.max_text_bytes)
    book = await asyncio.to_thread(_parse, upload.content, upload.fields.get("name"),
                                   upload.filename, limits)
    cap = limits.max_lore_entries
    if len(book.entries) > cap:
        raise TooLarge(f"a lorebook holds at most {cap} entries", limit=cap)
    async with core.session() as s:
        row = await repo.save_lorebook(s, book)
        return _summary(row, len(book.entries), [])


@router.get("/lorebooks/{lorebook_id}/export", responses={200: {"content": {"application/json": {}}}})
async def export_lorebook(lorebook_id: str, who: AnyUser, session: SessionDep) -> Response:
    """The book as a SillyTavern World Info file."""
    book = await repo.load_lorebook(session, lorebook_id)
    return Response(content=write_world_info(book), media_type="application/json",
                    headers=download_headers(book.name or "lorebook", "json"))


# -- links --------------------------------------------------------------------------------

async def _check_target(session: AsyncSession, kind: str, target_id: str | None,
                        who: Identity) -> None:
    if kind == "global":
        if target_id is not None:
            raise InvalidInput("a global link has no target_id")
        if not who.is_master:
            raise Forbidden("only the master links a lorebook to every chat")
        return
    if target_id is None:
        raise InvalidInput(f"a {kind} link needs a target_id")
    model = {"chat": Chat, "character": Character, "persona": Persona}[kind]
    target = await session.get(model, target_id)
    owner = getattr(target, "user_id", None)
    if target is None or (kind != "character" and not who.is_master and owner != who.user_id):
        raise NotFound(f"{kind} {target_id} not found")


@router.get("/lorebooks/{lorebook_id}/links")
async def list_links(lorebook_id: str, who: AnyUser, session: SessionDep) -> dict[str, Any]:
    row = await repo.get_book_row(session, lorebook_id)
    return {"links": [repo.link_json(x) for x in (await repo.links_of(session, [row.id]))[row.id]]}


@router.post("/lorebooks/{lorebook_id}/links", status_code=201)
async def add_link(lorebook_id: str, body: LinkIn, who: Trusted,
                   session: SessionDep) -> dict[str, Any]:
    """Use the book in a chat, with a character or persona, or (`global`) in every chat."""
    row = await repo.get_book_row(session, lorebook_id)
    await _check_target(session, body.target_kind, body.target_id, who)
    link = await repo.add_link(session, row.id, body.target_kind, body.target_id)
    return {"lorebook_id": row.id, **repo.link_json(link)}


@router.delete("/lorebooks/{lorebook_id}/links/global", status_code=204)
async def remove_global_link(lorebook_id: str, who: Trusted, session: SessionDep) -> Response:
    await _unlink(session, lorebook_id, "global", None, who)
    return Response(status_code=204)


@router.delete("/lorebooks/{lorebook_id}/links/{target_kind}/{target_id}", status_code=204)
async def remove_link(lorebook_id: str, target_kind: Literal["chat", "character", "persona"],
                      target_id: str, who: Trusted, session: SessionDep) -> Response:
    await _unlink(session, lorebook_id, target_kind, target_id, who)
    return Response(status_code=204)


async def _unlink(session: AsyncSession, lorebook_id: str, kind: str, target_id: str | None,
                  who: Identity) -> None:
    row = await repo.get_book_row(session, lorebook_id)
    if kind == "global" and not who.is_master:
        raise Forbidden("only the master changes the global lorebooks")
    if kind in ("chat", "persona") and not who.is_master:
        await _check_target(session, kind, target_id, who)
    try:
        await repo.remove_link(session, row.id, kind, target_id)
    except NotFound:
        raise NotFound(f"lorebook {row.id} is not linked to that {kind}") from None
