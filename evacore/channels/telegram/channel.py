"""The Telegram channel (R9.1, R14.2): one bot, its updates (long polling under a lease, or
a webhook) turned into tours through the one door, their answers delivered, and the
`telegram_react` tool's reactions.

Must not: run stages or judge answers; a tour is started with `core.tours.start` like any
other channel's. A sender the settings do not know gets no answer and nothing of theirs is
stored (unless `GUESTS` is on).
"""

from __future__ import annotations

import asyncio
import contextlib
import unicodedata
from typing import TYPE_CHECKING, Any

from aiogram.exceptions import TelegramAPIError, TelegramUnauthorizedError
from aiogram.methods import GetMe, SendMessage, SetMessageReaction, SetWebhook
from aiogram.types import Message, ReactionTypeEmoji, ReplyParameters, Update

from evacore.channels.telegram import binding, identity, incoming
from evacore.channels.telegram.api import (
    PASSING,
    BotApi,
    FloodWaitTooLong,
    RetryPolicy,
    make_bot,
)
from evacore.channels.telegram.delivery import LiveView
from evacore.channels.telegram.outbox import TOUR_KEY, Outbox, cancel, finish
from evacore.channels.telegram.polling import ALLOWED_UPDATES, Poller
from evacore.channels.telegram.reactions import canonical_reaction
from evacore.errors import EvacoreError, ToolError
from evacore.logs import get_logger
from evacore.pipeline.request import TourRequest
from evacore.store import telegram as store

if TYPE_CHECKING:
    from aiogram.types import User

    from evacore.config import TelegramSettings
    from evacore.core import Core

log = get_logger(__name__)
NEW_CHAT_TEXT = "A new chat has begun."
UNSET_TEXT = "⚠ This bot is not set up to answer yet; its owner has been told."
"""What a person other than the master is told when the channel's connection or character
setting names nothing (the master gets the setting's own error)."""
WEBHOOK_PATH = "/v1/telegram/webhook"
UPDATES_KEPT_SECONDS = 24 * 3600


class TelegramChannel:
    """Start with `await start()`, stop with `await stop()` (inside `evacore serve`)."""

    def __init__(self, core: Core, settings: TelegramSettings, *,
                 policy: RetryPolicy | None = None, poll_timeout: int = 10,
                 lease_seconds: float = 10.0, renew_every: float = 3.0,
                 sweep_every: float = 5.0, draft_every: float = 1.0,
                 typing_every: float = 4.0) -> None:
        if settings.token is None:
            raise ValueError("the Telegram channel needs telegram.token")
        self.core, self.settings = core, settings
        self.api = BotApi(make_bot(settings.token.get_secret_value(), settings.api_url),
                          policy)
        self.outbox = Outbox(core, self.api)
        self.poller = Poller(core, self.api, self.handle, poll_timeout=poll_timeout,
                             lease_seconds=lease_seconds, renew_every=renew_every)
        self.sweep_every, self.draft_every, self.typing_every = (
            sweep_every, draft_every, typing_every)
        self.me: User | None = None
        self.views: dict[str, LiveView] = {}
        """Tours running for Telegram here, by tour id (their live views)."""
        self._tasks: set[asyncio.Task[Any]] = set()
        self._poll_task: asyncio.Task[None] | None = None
        self._boot_task: asyncio.Task[None] | None = None
        self._forget_task: asyncio.Task[None] | None = None
        self._sweep_task: asyncio.Task[None] | None = None

    @property
    def webhook(self) -> bool:
        return self.settings.mode == "webhook"

    async def start(self) -> None:
        """Hook into the core, check the bot (getMe), then poll or set the webhook. A token
        Telegram refuses is an error; Telegram out of reach is tried again in the background."""
        self.core.tool_services["telegram"] = self
        self.core.save_hooks.append(self.outbox.save_hook)
        self._sweep_task = asyncio.create_task(self.outbox.run_sweeper(self.sweep_every),
                                               name="telegram-outbox")
        self._forget_task = asyncio.create_task(self._forget_updates(), name="telegram-forget")
        try:
            await self._boot()
        except TelegramUnauthorizedError as exc:
            await self.stop()
            raise RuntimeError("Telegram refused telegram.token (getMe answered 401): check "
                               "the token BotFather gave") from exc
        except (*PASSING, FloodWaitTooLong) as exc:
            log.warning("telegram.unreachable", error=str(exc), retry="in the background")
            self._boot_task = asyncio.create_task(self._boot_later(), name="telegram-boot")

    async def _forget_updates(self) -> None:
        """Hourly: updates taken more than a day ago are forgotten (Telegram keeps an update
        for 24 hours at most)."""
        while True:
            try:
                async with self.core.session() as s:
                    await store.forget_updates(s, UPDATES_KEPT_SECONDS)
            except Exception as exc:  # noqa: BLE001 - tried again in an hour
                log.warning("telegram.forget_failed", error=str(exc))
            await asyncio.sleep(3600)

    async def _boot_later(self) -> None:
        delay = 2.0
        while True:
            await asyncio.sleep(delay)
            try:
                await self._boot()
                return
            except TelegramUnauthorizedError:
                log.error("telegram.token_refused", hint="check telegram.token")
                return
            except Exception as exc:  # noqa: BLE001 - keep trying while the server runs
                log.warning("telegram.unreachable", error=str(exc))
                delay = min(delay * 2, 60.0)

    async def _boot(self) -> None:
        self.me = await self.api.call(GetMe())
        log.info("telegram.bot", username=self.me.username, id=self.me.id,
                 mode=self.settings.mode)
        if self.me.can_read_all_group_messages:
            log.info("telegram.groups", privacy="off",
                     meaning="the bot receives every group message; it answers those that "
                             "mention it or reply to it")
        else:
            log.info("telegram.groups", privacy="on",
                     meaning="privacy mode: in groups the bot receives only commands, "
                             "mentions of it and replies to it (BotFather /setprivacy)")
        async with self.core.session() as s:
            try:
                await binding.targets(s, self.settings)
            except EvacoreError as exc:
                log.error("telegram.settings", error=exc.message)
        if self.webhook:
            assert self.settings.webhook_url and self.settings.webhook_secret
            await self.api.call(SetWebhook(
                url=self.settings.webhook_url, allowed_updates=ALLOWED_UPDATES,
                secret_token=self.settings.webhook_secret.get_secret_value()))
            log.info("telegram.webhook_set", url=self.settings.webhook_url)
        else:
            self._poll_task = asyncio.create_task(self.poller.run(), name="telegram-polling")

    async def stop(self) -> None:
        """Stop polling (the lease let go), wait briefly for answers being delivered, unhook."""
        await cancel(self._boot_task)
        await cancel(self._forget_task)
        self._forget_task = None
        await cancel(self._poll_task)
        self._boot_task = self._poll_task = None
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=10)
        for task in list(self._tasks):
            await cancel(task)
        self.outbox.stopping.set()  # the answer being sent goes out whole first
        await finish(self._sweep_task, grace=10)
        self._sweep_task = None
        if self.core.tool_services.get("telegram") is self:
            del self.core.tool_services["telegram"]
        with contextlib.suppress(ValueError):
            self.core.save_hooks.remove(self.outbox.save_hook)
        await self.api.aclose()

    # incoming

    async def handle(self, update: Update) -> None:
        """One update (from polling or the webhook): a message becomes a tour."""
        message = update.message
        if message is None or message.from_user is None or message.from_user.is_bot:
            return
        sender = message.from_user
        role = identity.role_of(self.settings, sender.id)
        if role is None:
            log.info("telegram.ignored", reason="sender is neither master nor trusted and "
                     "guests are off", user_id=sender.id, chat_id=message.chat.id)
            return
        me = self.me
        if me is None:  # not booted yet (Telegram was out of reach): try again later
            raise RuntimeError("the Telegram channel has not reached Telegram yet")
        if not incoming.addressed(message, me.id, me.username):
            return
        command = incoming.command_of(message, me.username)
        group = message.chat.type in incoming.GROUPS
        async with self.core.session() as s:
            if not await store.first_take(s, update.update_id):
                log.info("telegram.duplicate_update", update_id=update.update_id)
                return
            who = await identity.identity_of(s, role, sender.id, incoming.sender_name(sender))
            owner = who.user_id
            if group:
                master = await store.first_master(s)
                owner = master.id if master is not None else None
            title = message.chat.title or incoming.sender_name(sender)
            try:
                bound = await binding.chat_for(s, self.settings, message.chat.id,
                                               kind=message.chat.type, title=title,
                                               owner_id=owner, fresh=command == "new")
            except EvacoreError as exc:  # the channel's settings name nothing that exists
                unset: EvacoreError | None = exc
            else:
                unset = None
        if unset is not None:
            log.error("telegram.settings", error=unset.message)
            await self._say(message, f"⚠ {unset.message}" if who.is_master else UNSET_TEXT)
            return
        if command == "new":
            await self._say(message, NEW_CHAT_TEXT)
            return
        got = await incoming.read(message, self.api, vision=bound.vision)
        if got is None:  # a service message (a pin, a member joining): nothing to answer
            return
        # the core lets only a chat's owner (or the master) talk in it; in a group the
        # channel itself has checked the sender, whose role decides the tools
        user_id = who.user_id if (who.user_id == bound.owner_id or who.is_master) else None
        try:
            running = self.core.tours.start(TourRequest(
                chat_id=bound.chat_id, user_id=user_id, role=who.role, text=got.text,
                images=got.images, channel_env={"telegram": True}), now=False)
        except EvacoreError as exc:
            log.warning("telegram.tour_refused", error=exc.message)
            await self._say(message, f"⚠ {exc.message}")
            return
        thread = incoming.topic_of(message)
        running.tour.data[TOUR_KEY] = {"chat": message.chat.id, "thread": thread,
                                       "message_id": message.message_id}
        running.tour.diagnostics["telegram"] = {"chat_id": message.chat.id,
                                                "message_id": message.message_id,
                                                "sender_id": sender.id}
        view = LiveView(self.api, self.outbox, running, message.chat.id,
                        private=message.chat.type == "private", thread=thread,
                        typing_every=self.typing_every, draft_every=self.draft_every)
        self.views[running.id] = view
        task = asyncio.create_task(self._watch(view), name=f"telegram-tour:{running.id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        running.step_now()  # what the outbox's save hook and the view read is in place now

    async def _watch(self, view: LiveView) -> None:
        try:
            await view.run()
        except Exception:  # the outbox sweep delivers what is left
            log.exception("telegram.delivery_failed", tour_id=view.running.id)
        finally:
            self.views.pop(view.running.id, None)

    async def _say(self, message: Message, text: str) -> None:
        try:
            await self.api.call(SendMessage(chat_id=message.chat.id, text=text,
                                            message_thread_id=incoming.topic_of(message),
                                            reply_parameters=ReplyParameters(
                                                message_id=message.message_id,
                                                allow_sending_without_reply=True)))
        except Exception as exc:  # noqa: BLE001 - a notice that did not arrive
            log.warning("telegram.notice_failed", error=str(exc))

    # the telegram_react tool

    async def react(self, chat: str, message_id: int, emoji: str) -> None:
        """Set `emoji` on message `message_id` of the Telegram chat of evacore chat `chat`."""
        reaction = canonical_reaction(emoji)
        if reaction is None:
            raise ToolError(f"Telegram does not allow {unicodedata.normalize('NFC', emoji)} "
                            "as a reaction; use one of its reaction emoji, e.g. 👍 ❤ 🔥 🎉 😁")
        async with self.core.session() as s:
            telegram_chat = await store.telegram_chat_of(s, chat)
        if telegram_chat is None:
            raise ToolError("this chat is not a Telegram chat")
        try:
            await self.api.call(SetMessageReaction(
                chat_id=telegram_chat, message_id=message_id,
                reaction=[ReactionTypeEmoji(emoji=reaction)]))
        except TelegramAPIError as exc:
            raise ToolError(f"Telegram refused the reaction: {exc.message}") from None
