"""Chat bindings: which chat holds a conversation a client keeps on its own side.

A client that resends the whole conversation each time (the OpenAI facade) is matched to its
chat by digests of what it has seen. Must not: compute digests or decide what a match means
(the channel does); it stores and finds them.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Select, bindparam, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from evacore.domain.ids import utcnow
from evacore.store import direct
from evacore.store.tables import Chat, ChatBinding

_BINDINGS = ChatBinding.__table__
_CHATS = Chat.__table__


def _newest_bound(digest_column: Any) -> Select[Any]:
    """Built once per digest kind: the most recently bound chat of a scope with a digest."""
    return (select(_BINDINGS.c.chat_id)
            .join(_CHATS, _CHATS.c.id == _BINDINGS.c.chat_id)
            .where(_BINDINGS.c.scope == bindparam("p_scope"),
                   digest_column == bindparam("p_digest"))
            .order_by(_BINDINGS.c.updated_at.desc()).limit(1))


_BY_FULL = _newest_bound(_BINDINGS.c.full_digest)
_BY_TURN = _newest_bound(_BINDINGS.c.turn_digest)
_NAMED = (select(_CHATS.c.user_id, _BINDINGS.c.turn_digest, _CHATS.c.character_id,
                 _CHATS.c.connection_id)
          .select_from(_CHATS.outerjoin(_BINDINGS, _BINDINGS.c.chat_id == _CHATS.c.id))
          .where(_CHATS.c.id == bindparam("p_chat_id")))


async def find_chat(session: AsyncSession, scope: str, *, full: str | None = None,
                    turn: str | None = None) -> str | None:
    """The most recently bound chat of `scope` whose whole view (`full`) or view without its
    last answer (`turn`) has this digest; None when no chat of the scope has it."""
    if full is not None:
        stmt, digest = _BY_FULL, full
    elif turn is not None:
        stmt, digest = _BY_TURN, turn
    else:
        return None
    rows = await direct.execute(session, stmt, {"p_scope": scope, "p_digest": digest})
    return str(rows[0][0]) if rows else None


async def named_chat(session: AsyncSession, chat_id: str
                     ) -> tuple[str | None, str | None, str | None, str | None] | None:
    """(the chat's owner, the turn digest it is bound with if any, its character, its
    connection) of the chat a request names; None when no such chat exists. One statement,
    no ORM objects."""
    rows = await direct.execute(session, _NAMED, {"p_chat_id": chat_id})
    if not rows:
        return None
    owner, turn, character_id, connection_id = rows[0]
    return owner, turn, character_id, connection_id


_REBIND = (update(ChatBinding.__table__)
           .where(ChatBinding.__table__.c.chat_id == bindparam("p_chat_id"))
           .values(scope=bindparam("p_scope"), full_digest=bindparam("p_full"),
                   turn_digest=bindparam("p_turn"), updated_at=bindparam("p_at"))
           .returning(ChatBinding.__table__.c.chat_id))
_FIRST_BIND = insert(ChatBinding.__table__)


async def bind(session: AsyncSession, chat_id: str, scope: str, *, full: str,
               turn: str | None) -> None:
    """Record what the client has now seen of `chat_id` (one row per chat): one `UPDATE`
    of the chat's row, an insert the first time."""
    now = utcnow()
    done = await direct.execute(session, _REBIND, {
        "p_chat_id": chat_id, "p_scope": scope, "p_full": full, "p_turn": turn, "p_at": now})
    if not done:
        await direct.execute(session, _FIRST_BIND, {
            "chat_id": chat_id, "scope": scope, "full_digest": full, "turn_digest": turn,
            "updated_at": now})
