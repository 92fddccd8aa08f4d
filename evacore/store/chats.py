"""Chats, messages and variants: create, read history newest-first, append, pick variants.

Must not: decide generation modes or build prompts; it stores and reads what the pipeline says.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cache
from types import SimpleNamespace
from typing import Any

from sqlalchemy import Select, bindparam, delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm.attributes import set_committed_value

from evacore.domain.ids import new_id, utcnow
from evacore.errors import NotFound
from evacore.redact import redact_json
from evacore.store import direct
from evacore.store.tables import Character, Chat, Connection, Message, Persona, Variant


@dataclass(slots=True)
class HistoryMessage:
    """A message as the pipeline reads it: the active variant's text and steps folded in."""

    id: str
    position: int
    role: str
    name: str | None
    content: str
    images: list[Any] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)
    hidden: bool = False
    variant_id: str | None = None
    created_at: Any = None
    resolved: bool = False
    """The text is the input as a tour resolved its macros (not to be evaluated again)."""
    unfinished: bool = False
    """The active variant is an answer that was stopped or failed (status `aborted` or
    `failed`): it stays in the chat, but a prompt never shows it as a finished answer."""


async def get_chat(session: AsyncSession, chat_id: str, *, lock: bool = False) -> Chat:
    stmt = select(Chat).where(Chat.id == chat_id)
    if lock and session.bind is not None and session.bind.dialect.name == "postgresql":
        stmt = stmt.with_for_update()
    chat = (await session.scalars(stmt)).first()
    if chat is None:
        raise NotFound(f"chat {chat_id} not found")
    return chat


_PARTS = (Chat, Connection, Character, Persona)
_NOT_READ = frozenset({"characters.image"})
"""Columns a tour never reads: a character's picture (it can be megabytes)."""


def _part_attrs(model: type[Any]) -> list[Any]:
    return [attr for attr in model.__mapper__.column_attrs
            if f"{attr.columns[0].table.name}.{attr.columns[0].name}" not in _NOT_READ]


@cache
def _part_keys() -> tuple[tuple[str, ...], ...]:
    """Each part's attribute names, in the order of its columns in `_parts_statement`."""
    return tuple(tuple(attr.key for attr in _part_attrs(model)) for model in _PARTS)


@cache
def _parts_statement(lock: bool) -> Select[Any]:
    """Built once: a tour's start costs no statement construction. Plain columns, not
    entities: the read takes the direct path and builds no ORM objects."""
    columns = [attr.columns[0] for model in _PARTS for attr in _part_attrs(model)]
    stmt = (
        select(*columns)
        .select_from(Chat.__table__
                     .outerjoin(Connection.__table__, Connection.id == Chat.connection_id)
                     .outerjoin(Character.__table__, Character.id == Chat.character_id)
                     .outerjoin(Persona.__table__, Persona.id == Chat.persona_id))
        .where(Chat.__table__.c.id == bindparam("p_chat_id"))
    )
    return stmt.with_for_update(of=Chat.__table__) if lock else stmt


async def chat_with_parts(
    session: AsyncSession, chat_id: str, *, lock: bool = False
) -> tuple[Any, Any | None, Any | None, Any | None]:
    """The chat with its connection, character and persona, in one query (a tour's start),
    as read-only records with the tables' attribute names (not ORM objects: nothing here is
    written back through them); `lock`: the chat's row is locked on PostgreSQL
    (`FOR UPDATE`)."""
    lock = lock and session.bind is not None and session.bind.dialect.name == "postgresql"
    rows = await direct.execute(session, _parts_statement(lock), {"p_chat_id": chat_id})
    if not rows:
        raise NotFound(f"chat {chat_id} not found")
    row, at, parts = tuple(rows[0]), 0, []
    for keys in _part_keys():
        values = row[at:at + len(keys)]
        at += len(keys)
        # an outer-joined part that is missing reads as NULLs, its id included
        parts.append(None if values[0] is None else SimpleNamespace(**dict(zip(keys, values))))
    return parts[0], parts[1], parts[2], parts[3]


async def add_message(
    session: AsyncSession,
    chat: Chat,
    *,
    role: str,
    content: str = "",
    name: str | None = None,
    images: list[Any] | None = None,
    hidden: bool = False,
    extra: dict[str, Any] | None = None,
    created_at: Any = None,
    flush: bool = True,
) -> Message:
    """Append a message at the chat's next position. The position is taken from the row
    itself in one statement (`UPDATE … RETURNING`), so concurrent writers of one chat never
    pick the same one, whatever the backend. With `flush=False` the message itself is
    written with the session's next flush."""
    now = utcnow()
    taken = await session.scalar(
        update(Chat).where(Chat.id == chat.id)
        .values(next_position=Chat.next_position + 1, updated_at=now)
        .returning(Chat.next_position)
        .execution_options(synchronize_session=False))
    if taken is None:
        raise NotFound(f"chat {chat.id} not found")
    position = int(taken) - 1
    set_committed_value(chat, "next_position", position + 1)
    set_committed_value(chat, "updated_at", now)
    msg = Message(
        id=new_id(),
        chat_id=chat.id,
        position=position,
        role=role,
        name=name,
        content=content,
        images=images or [],
        hidden=hidden,
        extra=extra or {},
    )
    if created_at is not None:
        msg.created_at = created_at
    session.add(msg)
    if flush:
        await session.flush()
    return msg


async def add_variant(
    session: AsyncSession, message: Message, *, activate: bool = True, flush: bool = True,
    **fields: Any
) -> Variant:
    if fields.get("meta"):
        fields["meta"] = redact_json(fields["meta"])  # it holds the tour's diagnostics
    variant = Variant(id=new_id(), message_id=message.id, **fields)
    session.add(variant)
    if activate:
        # set before the flush: a new message is inserted already pointing at it
        message.active_variant_id = variant.id
    if flush:
        await session.flush()
    return variant


async def last_message(session: AsyncSession, chat_id: str) -> Message | None:
    return (
        await session.scalars(
            select(Message)
            .where(Message.chat_id == chat_id)
            .order_by(Message.position.desc())
            .limit(1)
        )
    ).first()


async def get_message(session: AsyncSession, chat_id: str, message_id: str) -> Message:
    msg = await session.get(Message, message_id)
    if msg is None or msg.chat_id != chat_id:
        raise NotFound(f"message {message_id} not found in chat {chat_id}")
    return msg


async def variants_of(session: AsyncSession, message_ids: list[str]) -> dict[str, list[Variant]]:
    if not message_ids:
        return {}
    rows = (
        await session.scalars(
            select(Variant)
            .where(Variant.message_id.in_(message_ids))
            .order_by(Variant.created_at, Variant.id)
        )
    ).all()
    out: dict[str, list[Variant]] = {}
    for v in rows:
        out.setdefault(v.message_id, []).append(v)
    return out


_VARIANT_IDS = (select(Variant.__table__.c.id)
                .where(Variant.__table__.c.message_id == bindparam("p_message_id"))
                .order_by(Variant.__table__.c.created_at, Variant.__table__.c.id))


async def variant_ids(session: AsyncSession, message_id: str) -> list[str]:
    """A message's variant ids, oldest first (as `variants_of` orders them)."""
    return list((await session.scalars(_VARIANT_IDS, {"p_message_id": message_id})).all())


@cache
def _history_statement(before: bool, limit: int) -> Select[Any]:
    """Built once per shape: a history read costs no statement construction. Each message
    with only what a prompt needs of its active variant (a variant's metadata, the
    diagnostics of the tour that made it, can be large)."""
    m, v = Message.__table__.c, Variant.__table__.c
    stmt = (
        select(m.id, m.position, m.role, m.name, m.content, m.images, m.hidden, m.created_at,
               m.extra, v.id, v.content, v.steps, v.status)
        .select_from(Message.__table__.outerjoin(Variant.__table__,
                                                 v.id == m.active_variant_id))
        .where(m.chat_id == bindparam("p_chat_id"))
    )
    if before:
        stmt = stmt.where(m.position < bindparam("p_before"))
    return stmt.order_by(m.position.desc()).limit(limit)


async def history_newest_first(
    session: AsyncSession, chat_id: str, *, before: int | None = None, limit: int = 200
) -> list[HistoryMessage]:
    """A batch of messages, newest first, below position `before` (all when None)."""
    params: dict[str, Any] = {"p_chat_id": chat_id}
    if before is not None:
        params["p_before"] = before
    rows = await direct.execute(session, _history_statement(before is not None, limit), params)
    out = []
    for (id_, position, role, name, content, images, hidden, created_at, extra,
         variant_id, variant_content, variant_steps, variant_status) in rows:
        found = variant_id is not None
        # positional, in the order of HistoryMessage's fields: a long chat reads hundreds
        out.append(HistoryMessage(
            id_, position, role, name, variant_content if found else content, images or [],
            (variant_steps if found else None) or [], hidden, variant_id, created_at,
            not found and _is_resolved(content, extra), variant_status in _UNFINISHED))
    return out


_UNFINISHED = frozenset(("aborted", "failed"))


def _text_mark(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _is_resolved(content: str, extra: dict[str, Any] | None) -> bool:
    mark = (extra or {}).get("resolved")
    return mark is not None and mark == _text_mark(content)


async def store_resolved_text(session: AsyncSession, message_id: str, text: str) -> None:
    """Replace a message's text by its macro-resolved form, keeping the text as written in
    `extra["raw_content"]`. The mark follows the text: an edited message is not resolved."""
    msg = await session.get(Message, message_id)
    if msg is None:
        return
    raw = msg.content
    msg.content = text
    msg.extra = {**(msg.extra or {}), "raw_content": raw, "resolved": _text_mark(text)}


async def list_messages(
    session: AsyncSession, chat_id: str, *, offset: int = 0, limit: int | None = None
) -> tuple[list[Message], dict[str, list[Variant]]]:
    stmt = (
        select(Message)
        .where(Message.chat_id == chat_id)
        .order_by(Message.position)
        .offset(offset)
    )
    if limit is not None:
        stmt = stmt.limit(limit)
    msgs = list((await session.scalars(stmt)).all())
    return msgs, await variants_of(session, [m.id for m in msgs])


async def count_messages(session: AsyncSession, chat_id: str) -> int:
    return int(
        await session.scalar(select(func.count()).select_from(Message).where(Message.chat_id == chat_id))
        or 0
    )


async def delete_message(session: AsyncSession, message: Message) -> None:
    await session.execute(delete(Variant).where(Variant.message_id == message.id))
    await session.delete(message)


def message_json(m: Message, variants: list[Variant]) -> dict[str, Any]:
    """The public message shape (R12.3)."""
    active = next((v for v in variants if v.id == m.active_variant_id), None)
    return {
        "id": m.id,
        "role": m.role,
        "name": m.name,
        "content": active.content if active is not None else m.content,
        "active_variant": m.active_variant_id,
        "variants": [variant_json(v) for v in variants],
        "images": m.images or [],
        "hidden": m.hidden,
        "position": m.position,
        "created_at": m.created_at.isoformat() if m.created_at else None,
    }


def variant_json(v: Variant) -> dict[str, Any]:
    return {
        "id": v.id,
        "content": v.content,
        "steps": [
            {"tool_calls": s.get("tool_calls", []), "results": s.get("results", []),
             "text": s.get("text", "")}
            for s in (v.steps or [])
        ],
        "finish_reason": v.finish_reason,
        "status": v.status,
        "model": v.model,
        "usage": v.usage or {},
        "tour_id": v.tour_id,
        "created_at": v.created_at.isoformat() if v.created_at else None,
    }


async def attach_results(session: AsyncSession, chat_id: str,
                         results: dict[str, str]) -> list[str]:
    """Store results a client supplied for calls of the chat's last answer that have none yet
    (tools the client runs itself). Returns the call ids stored; other ids are ignored."""
    msg = await last_message(session, chat_id)
    if msg is None or msg.role != "assistant" or msg.active_variant_id is None:
        return []
    variant = await session.get(Variant, msg.active_variant_id)
    if variant is None:
        return []
    steps = [dict(step) for step in variant.steps or []]
    stored: list[str] = []
    for step in steps:
        have = {r.get("id") for r in step.get("results") or []}
        added = [{"id": call["id"], "content": results[call["id"]]}
                 for call in step.get("tool_calls") or []
                 if call.get("id") in results and call.get("id") not in have]
        if added:
            step["results"] = [*(step.get("results") or []), *added]
            stored.extend(r["id"] for r in added)
    if stored:
        variant.steps = steps
    return stored
