"""What a Telegram chat sees while a tour runs (R14.2): "typing" renewed every few seconds,
and in a private chat with no text rule armed the answer growing as a draft
(`sendMessageDraft`, at most one update a second); then the saved answer from the outbox.

While a text rule is armed (the tour's `held`, or a `hold` event) no draft is shown: the
answer may still be discarded, and a discarded answer is never seen, not even as a draft.
Must not: send the answer itself (the outbox does, from what was saved).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from typing import TYPE_CHECKING

from aiogram.methods import SendChatAction, SendMessageDraft
from aiogram.types import MessageEntity

from evacore.channels.telegram.outbox import Outbox, cancel
from evacore.channels.telegram.text import draft_of
from evacore.logs import get_logger

if TYPE_CHECKING:
    from evacore.channels.telegram.api import BotApi
    from evacore.pipeline.manager import RunningTour

log = get_logger(__name__)
TYPING_EVERY = 4.0
"""Seconds between "typing" actions (Telegram shows one for about five)."""
DRAFT_EVERY = 1.0
"""The least time between two draft updates."""


class LiveView:
    """One tour's view in its Telegram chat, from start to delivered answer."""

    def __init__(self, api: BotApi, outbox: Outbox, running: RunningTour, chat: int, *,
                 private: bool, thread: int | None = None,
                 typing_every: float = TYPING_EVERY,
                 draft_every: float = DRAFT_EVERY) -> None:
        self.api, self.outbox, self.running, self.chat = api, outbox, running, chat
        self.private, self.thread = private, thread
        self.typing_every, self.draft_every = typing_every, draft_every
        self.held = False
        self.text = ""
        self.shown = ""
        self.changed = asyncio.Event()
        self.draft_id = secrets.randbelow(2**31 - 1) + 1
        self.drafts = 0

    async def run(self) -> str | None:
        typing = asyncio.create_task(self._typing(), name=f"telegram-typing:{self.chat}")
        drafts = asyncio.create_task(self._drafts(), name=f"telegram-drafts:{self.chat}")
        try:
            async for batch in self.running.batches():
                for name, data in batch:
                    if name == "tour":
                        self.held = self.held or bool(data.get("held"))
                    elif name == "hold":
                        self.held = True
                    elif name == "delta":
                        self.text += data["text"]
                        self.changed.set()
                    elif name == "tool_result":
                        self.text = ""  # the next step's answer starts afresh
            with contextlib.suppress(Exception):
                await self.running.result()
        finally:
            await cancel(typing)
            await cancel(drafts)
        return await self.outbox.deliver(self.running.id)

    async def _typing(self) -> None:
        while True:
            try:
                await self.api.call(SendChatAction(chat_id=self.chat, action="typing",
                                                   message_thread_id=self.thread), attempts=1)
            except Exception as exc:  # noqa: BLE001 - a missing "typing" is no failure
                log.debug("telegram.typing_failed", error=str(exc))
            await asyncio.sleep(self.typing_every)

    async def _drafts(self) -> None:
        if not self.private:
            return
        last = 0.0
        while True:
            await self.changed.wait()
            wait = last + self.draft_every - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            self.changed.clear()
            if self.held or self.text == self.shown:
                continue
            part = draft_of(self.text)
            if part is None:
                continue
            last = time.monotonic()
            self.shown = self.text
            try:
                await self.api.call(SendMessageDraft(
                    chat_id=self.chat, draft_id=self.draft_id, text=part.text,
                    entities=[MessageEntity(**e) for e in part.entities] or None), attempts=1)
                self.drafts += 1
            except Exception as exc:  # noqa: BLE001 - the answer still comes as a message
                log.debug("telegram.draft_failed", error=str(exc))
