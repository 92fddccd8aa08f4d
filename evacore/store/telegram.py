"""The Telegram channel's records (R14.2): which chat a Telegram chat talks in, the users it
made for Telegram ids, the delivery outbox, and the polling lease with the update offset.

Must not: talk to Telegram or decide roles; it stores and finds. Leases are taken with one
conditional UPDATE, so two instances never both hold one.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import and_, delete, or_, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from evacore.domain.ids import utcnow
from evacore.store.tables import (
    Chat,
    TelegramChat,
    TelegramLease,
    TelegramOutbox,
    TelegramUpdate,
    User,
)


async def bound_chat(s: AsyncSession, telegram_chat_id: int) -> str | None:
    row = await s.get(TelegramChat, telegram_chat_id)
    return row.chat_id if row is not None else None


async def telegram_chat_of(s: AsyncSession, chat_id: str) -> int | None:
    """The Telegram chat an evacore chat belongs to (bound now, or before a `/new`), or None."""
    stmt = select(TelegramChat.telegram_chat_id).where(TelegramChat.chat_id == chat_id)
    found = (await s.scalars(stmt.limit(1))).first()
    if found is not None:
        return found
    chat = await s.get(Chat, chat_id)
    meta = (chat.meta or {}).get("telegram") if chat is not None else None
    value = meta.get("chat_id") if isinstance(meta, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


async def bind_chat(s: AsyncSession, telegram_chat_id: int, chat_id: str, kind: str) -> None:
    row = await s.get(TelegramChat, telegram_chat_id, with_for_update=_pg(s))
    if row is None:
        s.add(TelegramChat(telegram_chat_id=telegram_chat_id, chat_id=chat_id, kind=kind))
    else:
        row.chat_id, row.kind, row.updated_at = chat_id, kind, utcnow()
    await s.flush()


async def user_by_telegram_id(s: AsyncSession, telegram_id: int) -> User | None:
    return (await s.scalars(select(User).where(User.telegram_id == telegram_id))).first()


async def first_master(s: AsyncSession) -> User | None:
    stmt = select(User).where(User.role == "master").order_by(User.created_at)
    return (await s.scalars(stmt)).first()


async def first_take(s: AsyncSession, update_id: int) -> bool:
    """Record that update `update_id` is being handled; False when it was taken before (by
    this instance or another)."""
    insert = pg_insert if _pg(s) else sqlite_insert
    result = await s.execute(insert(TelegramUpdate).values(
        update_id=update_id, created_at=utcnow()).on_conflict_do_nothing(
        index_elements=["update_id"]))
    return bool(result.rowcount)


async def forget_updates(s: AsyncSession, older_than: float) -> None:
    cutoff = utcnow() - timedelta(seconds=older_than)
    await s.execute(delete(TelegramUpdate).where(TelegramUpdate.created_at < cutoff))


# the outbox

async def add_outbox(s: AsyncSession, *, tour_id: str, telegram_chat_id: int, text: str,
                     reply_to: int | None, owner: str, lease_seconds: float,
                     thread_id: int | None = None) -> None:
    s.add(TelegramOutbox(tour_id=tour_id, telegram_chat_id=telegram_chat_id, text=text,
                         reply_to=reply_to, thread_id=thread_id, parts_sent=0, sent_ids=[], status="pending",
                         owner=owner, attempts=0,
                         lease_until=utcnow() + timedelta(seconds=lease_seconds)))


async def outbox_row(s: AsyncSession, tour_id: str) -> TelegramOutbox | None:
    return await s.get(TelegramOutbox, tour_id)


async def claimable(s: AsyncSession, busy: set[str], limit: int = 20) -> list[str]:
    """Pending answers nobody holds (never taken, or their lease or backoff ran out), oldest
    first; `busy` are being sent here already."""
    stmt = select(TelegramOutbox.tour_id).where(
        TelegramOutbox.status == "pending",
        or_(TelegramOutbox.lease_until.is_(None), TelegramOutbox.lease_until < utcnow()),
    ).order_by(TelegramOutbox.created_at).limit(limit + len(busy))
    return [t for t in (await s.scalars(stmt)).all() if t not in busy][:limit]


async def reclaim(s: AsyncSession, owner: str) -> int:
    """At start: the pending answers this instance held in its previous life are free to
    send at once (nothing of this process is sending them)."""
    result = await s.execute(update(TelegramOutbox).where(
        TelegramOutbox.status == "pending", TelegramOutbox.owner == owner)
        .values(lease_until=None).execution_options(synchronize_session=False))
    return result.rowcount or 0


async def take_lease(s: AsyncSession, tour_id: str, owner: str, seconds: float) -> bool:
    """Hold a pending answer's delivery for `seconds`: one's own, a free one, or one whose
    lease ran out."""
    now = utcnow()
    result = await s.execute(
        update(TelegramOutbox).where(
            TelegramOutbox.tour_id == tour_id, TelegramOutbox.status == "pending",
            or_(TelegramOutbox.owner == owner, TelegramOutbox.lease_until.is_(None),
                TelegramOutbox.lease_until < now),
        ).values(owner=owner, lease_until=now + timedelta(seconds=seconds))
        .execution_options(synchronize_session=False))
    return bool(result.rowcount)


async def part_sent(s: AsyncSession, tour_id: str, index: int, message_id: int) -> None:
    row = await s.get(TelegramOutbox, tour_id, with_for_update=_pg(s))
    if row is None:
        return
    row.parts_sent = index + 1
    row.sent_ids = [*(row.sent_ids or []), message_id]


async def finish_outbox(s: AsyncSession, tour_id: str, status: str,
                        error: str | None = None) -> None:
    await s.execute(update(TelegramOutbox).where(TelegramOutbox.tour_id == tour_id).values(
        status=status, error=error, delivered_at=utcnow(), owner=None, lease_until=None)
        .execution_options(synchronize_session=False))


async def note_attempt(s: AsyncSession, tour_id: str, error: str, max_backoff: float, *,
                       at_least: float = 0.0) -> int:
    """A delivery stopped by a passing fault: counted, and not tried again (by any instance)
    before a backoff that doubles with each attempt (5 s, 10 s, … up to `max_backoff`), nor
    before `at_least` seconds (the `retry_after` of Telegram's flood control)."""
    row = await s.get(TelegramOutbox, tour_id, with_for_update=_pg(s))
    if row is None:
        return 0
    row.attempts = (row.attempts or 0) + 1
    row.error = error
    backoff = max(min(5.0 * 2 ** (row.attempts - 1), max_backoff), at_least)
    row.lease_until = utcnow() + timedelta(seconds=backoff)
    return row.attempts


# the polling lease

async def hold_lease(s: AsyncSession, name: str, holder: str, seconds: float) -> bool:
    """Take or renew the lease `name` for `seconds`: free, expired or already ours."""
    values: dict[str, Any] = {"name": name, "holder": None, "lease_until": None,
                              "next_offset": 0, "updated_at": utcnow()}
    insert = pg_insert if _pg(s) else sqlite_insert
    await s.execute(insert(TelegramLease).values(**values).on_conflict_do_nothing(
        index_elements=["name"]))
    now = utcnow()
    result = await s.execute(
        update(TelegramLease).where(
            TelegramLease.name == name,
            or_(TelegramLease.holder.is_(None), TelegramLease.holder == holder,
                TelegramLease.lease_until.is_(None), TelegramLease.lease_until < now),
        ).values(holder=holder, lease_until=now + timedelta(seconds=seconds), updated_at=now)
        .execution_options(synchronize_session=False))
    return bool(result.rowcount)


async def release_lease(s: AsyncSession, name: str, holder: str) -> None:
    await s.execute(update(TelegramLease).where(
        and_(TelegramLease.name == name, TelegramLease.holder == holder))
        .values(holder=None, lease_until=None, updated_at=utcnow())
        .execution_options(synchronize_session=False))


async def lease_row(s: AsyncSession, name: str) -> TelegramLease | None:
    return await s.get(TelegramLease, name, populate_existing=True)


async def save_offset(s: AsyncSession, name: str, holder: str, offset: int) -> bool:
    """Remember the next update to ask for; only the lease's holder may move it."""
    result = await s.execute(update(TelegramLease).where(
        TelegramLease.name == name, TelegramLease.holder == holder,
        TelegramLease.next_offset < offset).values(next_offset=offset)
        .execution_options(synchronize_session=False))
    return bool(result.rowcount)


def _pg(s: AsyncSession) -> bool:
    return s.bind is not None and s.bind.dialect.name == "postgresql"
