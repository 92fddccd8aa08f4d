"""The writes a tour makes at its start (stage 1) and its end (stage 14), as single Core
statements built once at import: no ORM objects, no flush, no statement construction or
cache-key work per tour, one statement per row, each on SQLite in one trip to the driver
(`store/direct.py`).

Must not: decide what a tour stores (the stages do) or open transactions (callers pass the
session of theirs). What several writers of one chat could race on is taken from the row in
the statement itself: the next position and the turn by `UPDATE … RETURNING`, the check
for a tour on another instance inside the tour's own `INSERT`.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from sqlalchemy import Update, bindparam, exists, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from evacore.domain.ids import new_id, utcnow
from evacore.redact import redact_json
from evacore.store import direct
from evacore.store.tables import Chat, Message, Variant
from evacore.store.tables import Tour as TourRow

_tours = TourRow.__table__
_chats = Chat.__table__
_messages = Message.__table__
_TOUR_COLUMNS = ("id", "chat_id", "user_id", "mode", "status", "env", "diagnostics",
                 "instance_id", "abort_requested", "created_at")
_OPEN_TOUR = insert(_tours).from_select(
    list(_TOUR_COLUMNS),
    select(*[bindparam(f"p_{c}", type_=_tours.c[c].type) for c in _TOUR_COLUMNS]).where(
        ~exists().where(_tours.c.chat_id == bindparam("p_chat_id"),
                        _tours.c.status == "running",
                        _tours.c.instance_id != bindparam("p_instance_id"))),
).returning(_tours.c.id)
_INSERT_MESSAGE = insert(_messages)
_INSERT_VARIANT = insert(Variant.__table__)
_ACTIVATE = (update(_messages)
             .where(_messages.c.id == bindparam("p_id"),
                    _messages.c.chat_id == bindparam("p_chat_id"))
             .values(active_variant_id=bindparam("p_variant_id")).returning(_messages.c.id))


async def open_tour(session: AsyncSession, *, id: str, chat_id: str, user_id: str | None,
                    mode: str, env: dict[str, Any], instance_id: str) -> bool:
    """Insert the tour's record, `running`, unless a tour of the chat runs on another
    instance: one `INSERT … SELECT … WHERE NOT EXISTS`. False when it was not inserted.

    The check is part of the insert, so it sees what the insert's lock lets it see: on
    SQLite the write lock (a snapshot older than the last commit fails instead of
    writing), on PostgreSQL the statement runs after the caller took the chat's row lock,
    which every other instance holds while it records its tour."""
    params = {"p_id": id, "p_chat_id": chat_id, "p_user_id": user_id, "p_mode": mode,
              "p_status": "running", "p_env": env, "p_diagnostics": {},
              "p_instance_id": instance_id, "p_abort_requested": False,
              "p_created_at": utcnow()}
    return bool(await direct.execute(session, _OPEN_TOUR, params))


@cache
def _touch(take_position: bool, count_turn: bool, chat_state: bool) -> Update:
    c = _chats.c
    values: dict[str, Any] = {"updated_at": bindparam("p_updated_at", type_=c.updated_at.type)}
    if take_position:
        values["next_position"] = c.next_position + 1
    if count_turn:
        values["turn"] = c.turn + 1
    if chat_state:
        values["variables"] = bindparam("p_variables", type_=c.variables.type)
        values["state"] = bindparam("p_state", type_=c.state.type)
    return (update(_chats).where(c.id == bindparam("p_chat_id")).values(values)
            .returning(c.next_position, c.turn))


async def touch_chat(session: AsyncSession, chat_id: str, *, take_position: bool = False,
                     count_turn: bool = False, variables: dict[str, Any] | None = None,
                     state: dict[str, Any] | None = None) -> Sequence[Any] | None:
    """One `UPDATE … RETURNING` of the chat's row: `updated_at`, and as asked the next
    message position taken, one committed answer counted (SPEC §1 turn), the variables and
    engine state written (both or neither). Returns (next_position, turn) as they are after
    it, None when the chat is gone. `next_position - 1` is the position taken."""
    chat_state = variables is not None
    params: dict[str, Any] = {"p_chat_id": chat_id, "p_updated_at": utcnow()}
    if chat_state:
        params.update(p_variables=variables, p_state=state if state is not None else {})
    rows = await direct.execute(session, _touch(take_position, count_turn, chat_state), params)
    return rows[0] if rows else None


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
    await direct.execute(session, _INSERT_MESSAGE, row)
    return row


async def activate_variant(session: AsyncSession, chat_id: str, message_id: str,
                           variant_id: str) -> bool:
    """Make `variant_id` the message's active variant; False when the message is not the
    chat's (or is gone)."""
    params = {"p_id": message_id, "p_chat_id": chat_id, "p_variant_id": variant_id}
    return bool(await direct.execute(session, _ACTIVATE, params))


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
    await direct.execute(session, _INSERT_VARIANT, row)
