"""Steps the Telegram tests share: a message in, the bot's answer out, what was stored."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import select

from evacore.core import Core
from evacore.store.tables import Chat, Message, TelegramChat, TelegramOutbox, Tour, Variant
from tests.fakes.telegram import FakeBotApi


async def answers_after(bot_api: FakeBotApi, chat_id: int, count: int = 1,
                        timeout: float = 15.0) -> list[dict[str, Any]]:
    """Wait for `count` more sendMessage calls to `chat_id`; returns those."""
    before = len(bot_api.sent(chat_id))
    return await wait_sent(bot_api, chat_id, before + count, timeout)


async def wait_sent(bot_api: FakeBotApi, chat_id: int, total: int,
                    timeout: float = 15.0) -> list[dict[str, Any]]:
    await bot_api.wait_for(lambda: len(bot_api.sent(chat_id)) >= total, timeout)
    return bot_api.sent(chat_id)


async def chat_of(core: Core, telegram_chat: int) -> str | None:
    async with core.session() as s:
        row = await s.get(TelegramChat, telegram_chat)
        return row.chat_id if row else None


async def stored(core: Core, chat_id: str) -> list[tuple[str, str]]:
    """(role, text) of each message, an assistant's as its active variant."""
    async with core.session() as s:
        rows = (await s.scalars(select(Message).where(Message.chat_id == chat_id)
                                .order_by(Message.position))).all()
        out = []
        for m in rows:
            if m.role == "assistant":
                v = await s.get(Variant, m.active_variant_id)
                out.append((m.role, v.content if v else ""))
            else:
                out.append((m.role, m.content))
        return out


async def count_chats(core: Core) -> int:
    async with core.session() as s:
        return len((await s.scalars(select(Chat.id))).all())


async def outbox(core: Core) -> list[TelegramOutbox]:
    async with core.session() as s:
        return list((await s.scalars(select(TelegramOutbox))).all())


async def last_tour_env(core: Core) -> dict[str, Any]:
    """The environment flags of the newest tour."""
    async with core.session() as s:
        tour = (await s.scalars(select(Tour).order_by(Tour.created_at.desc()).limit(1))).one()
        return dict(tour.env)


async def settled(core: Core, timeout: float = 10.0) -> list[TelegramOutbox]:
    """Wait until every answer in the outbox is sent or failed; returns the rows."""
    for _ in range(int(timeout / 0.05)):
        rows = await outbox(core)
        if rows and all(r.status != "pending" for r in rows):
            return rows
        await asyncio.sleep(0.05)
    raise AssertionError(f"the outbox did not settle: {[(r.status, r.parts_sent) for r in rows]}")
