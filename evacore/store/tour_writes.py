"""The writes a tour makes at its start (stage 1) and its end (stage 14), as single Core
statements: no ORM objects, no flush, one statement per row.

Must not: decide what a tour stores (the stages do) or open transactions (callers pass the
session of theirs). What several writers of one chat could race on is taken from the row in
the statement itself: the next position and the turn by `UPDATE … RETURNING`, the check
for a tour on another instance inside the tour's own `INSERT`.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Row, exists, insert, literal, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from evacore.domain.ids import new_id, utcnow
from evacore.redact import redact_json
from evacore.store.tables import Chat, Message, Variant
from evacore.store.tables import Tour as TourRow

_TOUR_COLUMNS = ("id", "chat_id", "user_id", "mode", "status", "env", "diagnostics",
                 "instance_id", "abort_requested", "created_at")


async def open_tour(session: AsyncSession, *, id: str, chat_id: str, user_id: str | None,
                    mode: str, env: dict[str, Any], instance_id: str) -> bool:
    """Insert the tour's record, `running`, unless a tour of the chat runs on another
    instance: one `INSERT … SELECT … WHERE NOT EXISTS`. False when it was not inserted.

    The check is part of the insert, so it sees what the insert's lock lets it see: on
    SQLite the write lock (a snapshot older than the last commit fails instead of
    writing), on PostgreSQL the statement runs after the caller took the chat's row lock,
    which every other instance holds while it records its tour."""
    table = TourRow.__table__
    values = {"id": id, "chat_id": chat_id, "user_id": user_id, "mode": mode,
              "status": "running", "env": env, "diagnostics": {}, "instance_id": instance_id,
              "abort_requested": False, "created_at": utcnow()}
    elsewhere = exists().where(table.c.chat_id == chat_id, table.c.status == "running",
                               table.c.instance_id != instance_id)
    source = select(*[literal(values[c], type_=table.c[c].type) for c in _TOUR_COLUMNS]
                    ).where(~elsewhere)
    stmt = insert(table).from_select(list(_TOUR_COLUMNS), source).returning(table.c.id)
    return (await session.execute(stmt)).first() is not None


async def touch_chat(session: AsyncSession, chat_id: str, *, take_position: bool = False,
                     count_turn: bool = False, variables: dict[str, Any] | None = None,
                     state: dict[str, Any] | None = None) -> Row[Any] | None:
    """One `UPDATE … RETURNING` of the chat's row: `updated_at`, and as asked the next
    message position taken, one committed answer counted (SPEC §1 turn), the variables and
    engine state written. Returns (next_position, turn) as they are after it, None when the
    chat is gone. `next_position - 1` is the position taken."""
    c = Chat.__table__.c
    values: dict[str, Any] = {"updated_at": utcnow()}
    if take_position:
        values["next_position"] = c.next_position + 1
    if count_turn:
        values["turn"] = c.turn + 1
    if variables is not None:
        values["variables"] = variables
    if state is not None:
        values["state"] = state
    stmt = (update(Chat.__table__).where(c.id == chat_id).values(values)
            .returning(c.next_position, c.turn))
    return (await session.execute(stmt)).first()


async def add_message(session: AsyncSession, chat_id: str, *, role: str, content: str = "",
                      name: str | None = None, images: list[Any] | None = None,
                      extra: dict[str, Any] | None = None,
                      active_variant_id: str | None = None) -> dict[str, Any] | None:
    """Append a message at the chat's next position (taken from the row, as
    `store.chats.add_message` does). Returns what was written (id, position, role, name,
    content, hidden, created_at), None when the chat is gone."""
    taken = await touch_chat(session, chat_id, take_position=True)
    if taken is None:
        return None
    return await insert_message(session, chat_id, position=int(taken[0]) - 1, role=role,
                                content=content, name=name, images=images, extra=extra,
                                active_variant_id=active_variant_id)


async def insert_message(session: AsyncSession, chat_id: str, *, position: int, role: str,
                         content: str = "", name: str | None = None,
                         images: list[Any] | None = None, extra: dict[str, Any] | None = None,
                         active_variant_id: str | None = None) -> dict[str, Any]:
    """Insert a message at a position the caller took (`touch_chat(take_position=True)`)."""
    row = {"id": new_id(), "chat_id": chat_id, "position": position, "role": role,
           "name": name, "content": content, "images": images or [],
           "active_variant_id": active_variant_id, "hidden": False, "extra": extra or {},
           "created_at": utcnow()}
    await session.execute(insert(Message.__table__), row)
    return row


async def activate_variant(session: AsyncSession, chat_id: str, message_id: str,
                           variant_id: str) -> bool:
    """Make `variant_id` the message's active variant; False when the message is not the
    chat's (or is gone)."""
    t = Message.__table__
    stmt = (update(t).where(t.c.id == message_id, t.c.chat_id == chat_id)
            .values(active_variant_id=variant_id).returning(t.c.id))
    return (await session.execute(stmt)).first() is not None


async def insert_variant(session: AsyncSession, *, id: str, message_id: str,
                         **fields: Any) -> None:
    """Insert a variant; its `meta` (which holds the tour's diagnostics) passes
    `evacore.redact` unless the caller says it did (`redacted=True`)."""
    redacted = fields.pop("redacted", False)
    if fields.get("meta") and not redacted:
        fields["meta"] = redact_json(fields["meta"])
    row = {"id": id, "message_id": message_id, "content": "", "steps": [],
           "finish_reason": None, "status": "complete", "usage": {}, "timings": {},
           "model": None, "tour_id": None, "meta": {}, "created_at": utcnow(), **fields}
    await session.execute(insert(Variant.__table__), row)
