"""Delivery of saved answers (R14.2): the save hook writes each Telegram tour's answer into
the outbox in the tour's own save transaction, and `deliver` sends it part by part, marking
each part sent as it goes; what a restart finds pending is sent then, from the first part
not yet sent, so nothing is lost and nothing is sent twice.

Must not: send a text the tour did not save, or send the parts of two answers of one chat
interleaved (one chat's deliveries take turns).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from aiogram.exceptions import TelegramAPIError, TelegramBadRequest
from aiogram.methods import SendMessage
from aiogram.types import MessageEntity, ReplyParameters

from evacore.channels.telegram.api import PASSING, BotApi, FloodWaitTooLong
from evacore.channels.telegram.text import Part, parts_of, split_tail
from evacore.logs import get_logger
from evacore.store import telegram as store

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from evacore.core import Core
    from evacore.pipeline.tour import Tour

log = get_logger(__name__)
LEASE_SECONDS = 60.0
"""How long one instance holds an answer's delivery before another may take it over."""
MAX_BACKOFF = 300.0
"""The longest wait between two tries of an answer Telegram could not take (network faults,
5xx, long flood waits): it is tried again until it is sent; only a refusal ends it."""
TOUR_KEY = "telegram"
"""`tour.data[TOUR_KEY]`: the Telegram chat and message a tour answers (set by the channel)."""


def failure_notice(tour: Tour) -> str:
    message = (tour.error or {}).get("message") or "the answer failed"
    return f"⚠ No answer this time: {message}"


class Outbox:
    def __init__(self, core: Core, api: BotApi, *, lease_seconds: float = LEASE_SECONDS,
                 max_backoff: float = MAX_BACKOFF) -> None:
        self.core, self.api = core, api
        self.owner = core.instance_id
        self.lease_seconds, self.max_backoff = lease_seconds, max_backoff
        self.busy: set[str] = set()
        self.stopping = asyncio.Event()
        """Set by the channel's stop: the sweeper finishes the answer it is sending, then ends."""
        self._locks: dict[int, asyncio.Lock] = {}

    async def save_hook(self, s: AsyncSession, tour: Tour) -> None:
        """Stage 14: a Telegram tour's answer goes into the outbox with the answer itself."""
        info = tour.data.get(TOUR_KEY)
        if not info:
            return
        if tour.status == "completed":
            text = tour.answer
        elif tour.status == "failed":
            text = failure_notice(tour)
        else:  # aborted, or stopped by a shutdown: nothing is sent
            return
        visible, reply_to = split_tail(text)
        await store.add_outbox(s, tour_id=tour.id, telegram_chat_id=int(info["chat"]),
                               text=visible, reply_to=reply_to, owner=self.owner,
                               lease_seconds=self.lease_seconds, thread_id=info.get("thread"))

    def _lock(self, chat: int) -> asyncio.Lock:
        lock = self._locks.get(chat)
        if lock is None:
            lock = self._locks[chat] = asyncio.Lock()
        return lock

    async def deliver(self, tour_id: str) -> str | None:
        """Send what is left of a pending answer; returns its status after (None: none)."""
        async with self.core.session() as s:
            row = await store.outbox_row(s, tour_id)
            chat = row.telegram_chat_id if row is not None else None
        if chat is None:
            return None
        async with self._lock(chat):
            self.busy.add(tour_id)
            try:
                return await self._deliver(tour_id)
            finally:
                self.busy.discard(tour_id)

    async def _deliver(self, tour_id: str) -> str | None:
        async with self.core.session() as s:
            held = await store.take_lease(s, tour_id, self.owner, self.lease_seconds)
            row = await store.outbox_row(s, tour_id)
            if row is None:
                return None
            if not held or row.status != "pending":
                return row.status
            chat, text, reply_to, done = (row.telegram_chat_id, row.text, row.reply_to,
                                          row.parts_sent)
            thread = row.thread_id
        parts = parts_of(text)
        for index in range(done, len(parts)):
            try:
                sent = await self._send(chat, parts[index], reply_to if index == 0 else None,
                                        thread)
            except (*PASSING, FloodWaitTooLong) as exc:
                flood = exc.retry_after if isinstance(exc, FloodWaitTooLong) else 0.0
                async with self.core.session() as s:
                    attempts = await store.note_attempt(s, tour_id, str(exc), self.max_backoff,
                                                        at_least=flood)
                log.warning("telegram.delivery_postponed", tour_id=tour_id, error=str(exc),
                            attempts=attempts)
                return "pending"
            except TelegramAPIError as exc:  # a refusal (400, 403, a migrated group …)
                log.warning("telegram.delivery_refused", tour_id=tour_id, error=str(exc))
                async with self.core.session() as s:
                    await store.finish_outbox(s, tour_id, "failed", str(exc))
                return "failed"
            async with self.core.session() as s:
                await store.part_sent(s, tour_id, index, sent)
                if index + 1 < len(parts):
                    await store.take_lease(s, tour_id, self.owner, self.lease_seconds)
        async with self.core.session() as s:
            await store.finish_outbox(s, tour_id, "sent")
        return "sent"

    async def _send(self, chat: int, part: Part, reply_to: int | None,
                    thread: int | None = None) -> int:
        """One part; entities Telegram refuses are dropped and the plain text sent instead."""
        reply = ReplyParameters(message_id=reply_to, allow_sending_without_reply=True) \
            if reply_to else None
        entities = [MessageEntity(**e) for e in part.entities] or None
        try:
            message = await self.api.call(SendMessage(
                chat_id=chat, message_thread_id=thread, text=part.text, entities=entities,
                reply_parameters=reply))
        except TelegramBadRequest as exc:
            if not entities or "entit" not in str(exc).lower():
                raise
            message = await self.api.call(SendMessage(
                chat_id=chat, message_thread_id=thread, text=part.text, reply_parameters=reply))
        return int(message.message_id)

    async def sweep(self) -> int:
        """Deliver the pending answers this instance may take (its previous life's, and any
        whose holder stopped); returns how many were sent."""
        async with self.core.session() as s:
            ids = await store.claimable(s, set(self.busy))
        sent = 0
        for tour_id in ids:
            if self.stopping.is_set():
                break
            if tour_id in self.core.tours.running:
                continue  # still saving here: its own delivery follows
            if await self.deliver(tour_id) == "sent":
                sent += 1
        return sent

    async def run_sweeper(self, every: float) -> None:
        """Sweep every `every` seconds; first, this instance's answers of its previous life
        are freed, so they go out at once."""
        try:
            async with self.core.session() as s:
                await store.reclaim(s, self.owner)
        except Exception:
            log.warning("telegram.reclaim_failed", exc_info=True)
        while not self.stopping.is_set():
            try:
                await self.sweep()
            except Exception:  # the sweep must outlive a passing fault
                log.warning("telegram.sweep_failed", exc_info=True)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), every)


async def finish(task: asyncio.Task[Any] | None, grace: float) -> None:
    """Let `task` end by itself within `grace` seconds, then cancel it."""
    if task is None:
        return
    with contextlib.suppress(TimeoutError, asyncio.CancelledError, Exception):
        await asyncio.wait_for(asyncio.shield(task), grace)
    await cancel(task)


async def cancel(task: asyncio.Task[Any] | None) -> None:
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
