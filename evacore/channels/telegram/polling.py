"""Long polling under a lease (R14.2): with several instances on one database only the
lease's holder calls getUpdates; it renews the lease every `renew_every` seconds and stops
polling the moment a renewal fails, so two instances never poll at once (no 409). When the
holder stops it lets the lease go at once; when it dies its lease runs out, and a standby
that retries every `renew_every` seconds takes over within `lease_seconds + renew_every`.

The next update offset is kept with the lease, so a new holder goes on where the last one
stopped. Must not: handle updates itself (the channel's `handle` does, one at a time).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiogram import Bot
from aiogram.exceptions import TelegramConflictError
from aiogram.methods import DeleteWebhook, GetUpdates
from aiogram.types import Update
from pydantic import ValidationError

from evacore.channels.telegram.api import PASSING, BotApi, FloodWaitTooLong
from evacore.logs import get_logger
from evacore.store import telegram as store

if TYPE_CHECKING:
    from evacore.core import Core

log = get_logger(__name__)
LEASE = "polling"
ALLOWED_UPDATES = ["message"]


class _RawUpdates(GetUpdates):
    """getUpdates with its answer left unread: each update is read on its own
    (`read_update`), so one this aiogram cannot read (a field of a newer Bot API) is skipped
    instead of failing the whole batch, and the offset moves past it."""

    __returning__ = list[Any]


def read_update(raw: Any, bot: Bot) -> tuple[int | None, Update | None]:
    """(its update_id, the update) of one update as Telegram sent it; the update is None when
    it cannot be read (logged without its content), the id None when it has none."""
    update_id = raw.get("update_id") if isinstance(raw, dict) else None
    if not isinstance(update_id, int) or isinstance(update_id, bool):
        log.warning("telegram.update_unreadable", reason="no update_id")
        return None, None
    try:
        return update_id, Update.model_validate(raw, context={"bot": bot})
    except ValidationError as exc:
        where = sorted({".".join(str(p) for p in e["loc"][:3]) for e in exc.errors()})[:5]
        log.warning("telegram.update_unreadable", update_id=update_id, fields=where,
                    hint="skipped: a newer Bot API than this aiogram reads?")
        return update_id, None


class Poller:
    def __init__(self, core: Core, api: BotApi, handle: Callable[[Update], Awaitable[None]], *,
                 poll_timeout: int = 10, lease_seconds: float = 10.0,
                 renew_every: float = 3.0) -> None:
        self.core, self.api, self.handle = core, api, handle
        self.holder = core.instance_id
        self.poll_timeout = poll_timeout
        self.lease_seconds, self.renew_every = lease_seconds, renew_every
        self.polling = asyncio.Event()
        """Set while this instance holds the lease and polls."""
        self.polls = 0
        self._webhook_cleared = False

    async def _hold(self) -> bool:
        try:
            async with self.core.session() as s:
                return await store.hold_lease(s, LEASE, self.holder, self.lease_seconds)
        except Exception:  # a database hiccup: not holding it
            log.warning("telegram.lease_failed", exc_info=True)
            return False

    async def run(self) -> None:
        """Until cancelled: wait for the lease, poll while holding it."""
        try:
            while True:
                if not await self._hold():
                    await asyncio.sleep(self.renew_every)
                    continue
                log.info("telegram.polling", instance=self.holder)
                lost = asyncio.Event()
                keeper = asyncio.create_task(self._keep(lost), name="telegram-lease")
                self.polling.set()
                try:
                    await self._poll(lost)
                except Exception:  # try again, the lease is renewed meanwhile
                    log.exception("telegram.polling_failed")
                    await asyncio.sleep(self.renew_every)
                finally:
                    self.polling.clear()
                    keeper.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await keeper
                if lost.is_set():
                    log.warning("telegram.lease_lost", instance=self.holder)
        finally:
            self.polling.clear()
            with contextlib.suppress(Exception):
                async with self.core.session() as s:
                    await store.release_lease(s, LEASE, self.holder)

    async def _keep(self, lost: asyncio.Event) -> None:
        while True:
            await asyncio.sleep(self.renew_every)
            if not await self._hold():
                lost.set()
                return

    async def _poll(self, lost: asyncio.Event) -> None:
        if not self._webhook_cleared:  # getUpdates answers 409 while a webhook is set
            await self.api.call(DeleteWebhook(drop_pending_updates=False))
            self._webhook_cleared = True
        async with self.core.session() as s:
            row = await store.lease_row(s, LEASE)
            offset = row.next_offset if row is not None else 0
        while not lost.is_set():
            request = asyncio.ensure_future(self.api.call(
                _RawUpdates(offset=offset or None, timeout=self.poll_timeout,
                            allowed_updates=ALLOWED_UPDATES),
                timeout=self.poll_timeout + 10, attempts=1))
            gone = asyncio.ensure_future(lost.wait())
            try:
                await asyncio.wait({request, gone}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                gone.cancel()
                if not request.done():  # the lease is gone, or polling stops: at once
                    request.cancel()
                    with contextlib.suppress(BaseException):
                        await request
            if request.cancelled():
                return
            self.polls += 1
            try:
                updates = request.result()
            except TelegramConflictError as exc:
                log.warning("telegram.conflict", error=str(exc),
                            hint="another program polls this bot, or a webhook is set")
                await asyncio.sleep(self.renew_every)
                continue
            except (*PASSING, FloodWaitTooLong) as exc:
                log.warning("telegram.poll_failed", error=str(exc))
                await asyncio.sleep(1.0)
                continue
            for raw in updates:
                update_id, update = read_update(raw, self.api.bot)
                if update is not None:
                    try:
                        await self.handle(update)
                    except Exception:  # one bad update must not stop the chat
                        log.exception("telegram.update_failed", update_id=update_id)
                if update_id is not None:
                    offset = max(offset, update_id + 1)
            if updates:
                async with self.core.session() as s:
                    await store.save_offset(s, LEASE, self.holder, offset)
