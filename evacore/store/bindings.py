"""Chat bindings: which chat holds a conversation a client keeps on its own side.

A client that resends the whole conversation each time (the OpenAI facade) is matched to its
chat by digests of what it has seen. Must not: compute digests or decide what a match means
(the channel does); it stores and finds them.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from evacore.domain.ids import utcnow
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


async def bind(session: AsyncSession, chat_id: str, scope: str, *, full: str,
               turn: str | None) -> None:
    """Record what the client has now seen of `chat_id` (one row per chat)."""
    row = await session.get(ChatBinding, chat_id)
    if row is None:
        session.add(ChatBinding(chat_id=chat_id, scope=scope, full_digest=full,
                                turn_digest=turn))
    else:
        row.scope, row.full_digest, row.turn_digest = scope, full, turn
        row.updated_at = utcnow()
    await session.flush()
