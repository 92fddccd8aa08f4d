"""Chat bindings: which chat holds a conversation a client keeps on its own side.

A client that resends the whole conversation each time (the OpenAI facade) is matched to its
chat by digests of what it has seen. Must not: compute digests or decide what a match means
(the channel does); it stores and finds them.
"""

from __future__ import annotations

from sqlalchemy import bindparam, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from evacore.domain.ids import utcnow
from evacore.store import direct
from evacore.store.tables import Chat, ChatBinding


async def find_chat(session: AsyncSession, scope: str, *, full: str | None = None,
                    turn: str | None = None) -> str | None:
    """The most recently bound chat of `scope` whose whole view (`full`) or view without its
    last answer (`turn`) has this digest; None when no chat of the scope has it."""
    stmt = select(ChatBinding.chat_id).join(Chat, Chat.id == ChatBinding.chat_id).where(
        ChatBinding.scope == scope)
    if full is not None:
        stmt = stmt.where(ChatBinding.full_digest == full)
    elif turn is not None:
        stmt = stmt.where(ChatBinding.turn_digest == turn)
    else:
        return None
    row = (await session.execute(stmt.order_by(ChatBinding.updated_at.desc()).limit(1))).first()
    return row[0] if row is not None else None


_REBIND = (update(ChatBinding.__table__)
           .where(ChatBinding.__table__.c.chat_id == bindparam("p_chat_id"))
           .values(scope=bindparam("p_scope"), full_digest=bindparam("p_full"),
                   turn_digest=bindparam("p_turn"), updated_at=bindparam("p_at"))
           .returning(ChatBinding.__table__.c.chat_id))


async def bind(session: AsyncSession, chat_id: str, scope: str, *, full: str,
               turn: str | None) -> None:
    """Record what the client has now seen of `chat_id` (one row per chat): one `UPDATE`
    of the chat's row, an insert the first time."""
    now = utcnow()
    done = await direct.execute(session, _REBIND, {
        "p_chat_id": chat_id, "p_scope": scope, "p_full": full, "p_turn": turn, "p_at": now})
    if not done:
        session.add(ChatBinding(chat_id=chat_id, scope=scope, full_digest=full,
                                turn_digest=turn, updated_at=now))
        await session.flush()
