"""The Bot API as the channel calls it: aiogram's client aimed at `API_URL`
(`TelegramAPIServer.from_base`), each call retried on flood control (429, after its
`retry_after`), on network faults and on Telegram's 5xx answers, a bounded number of times.

Must not: retry a refusal (400, 403, 409): those reach the caller as aiogram's exceptions.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TypeVar

from aiogram import Bot
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer
from aiogram.exceptions import (
    RestartingTelegram,
    TelegramNetworkError,
    TelegramRetryAfter,
    TelegramServerError,
)
from aiogram.methods.base import TelegramMethod

from evacore.logs import get_logger

log = get_logger(__name__)
T = TypeVar("T")
PASSING = (TelegramNetworkError, TelegramServerError, RestartingTelegram)
"""Faults worth another try: the request may not have reached Telegram, or it failed there."""


@dataclass
class RetryPolicy:
    attempts: int = 5
    """Tries per call for network faults and 5xx answers."""
    backoff: float = 0.5
    """Seconds before the second try; doubled each time up to `max_backoff`."""
    max_backoff: float = 8.0
    flood_waits: int = 10
    """Times a call waits out a 429 before it gives up."""
    max_retry_after: float = 120.0
    """The longest `retry_after` waited for; a longer one ends the call (tried again later)."""


class FloodWaitTooLong(Exception):
    """Telegram asked to wait longer than the channel waits in one go (`retry_after`
    seconds: nothing of this bot is sent before then)."""

    def __init__(self, message: str, retry_after: float = 0.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def make_bot(token: str, api_url: str) -> Bot:
    session = AiohttpSession(api=TelegramAPIServer.from_base(api_url))
    return Bot(token=token, session=session)


class BotApi:
    """One bot and its retrying calls."""

    def __init__(self, bot: Bot, policy: RetryPolicy | None = None) -> None:
        self.bot = bot
        self.policy = policy or RetryPolicy()
        self.flood_waits = 0
        """429s waited out so far (diagnostics, tests)."""

    async def call(self, method: TelegramMethod[T], *, timeout: int | None = None,
                   attempts: int | None = None) -> T:
        """Call `method`; passing faults are tried again, a 429 after its `retry_after`."""
        policy = self.policy
        tries = attempts or policy.attempts
        delay = policy.backoff
        failures = floods = 0
        while True:
            try:
                return await self.bot(method, request_timeout=timeout)
            except TelegramRetryAfter as exc:
                floods += 1
                self.flood_waits += 1
                if floods > policy.flood_waits or exc.retry_after > policy.max_retry_after:
                    raise FloodWaitTooLong(str(exc), exc.retry_after) from exc
                log.info("telegram.flood_wait", method=method.__api_method__,
                         retry_after=exc.retry_after)
                await asyncio.sleep(exc.retry_after)
            except PASSING as exc:
                failures += 1
                if failures >= tries:
                    raise
                log.info("telegram.retry", method=method.__api_method__, error=str(exc),
                         attempt=failures)
                await asyncio.sleep(delay)
                delay = min(delay * 2, policy.max_backoff)

    async def download(self, file_path: str) -> bytes:
        """A file's bytes from `{API_URL}/file/bot{TOKEN}/{file_path}`, retried like a call."""
        delay = self.policy.backoff
        for attempt in range(1, self.policy.attempts + 1):
            try:
                data = await self.bot.download_file(file_path, timeout=30)
                assert data is not None
                return bytes(data.read())
            except (TimeoutError, TelegramNetworkError, TelegramServerError, OSError):
                if attempt >= self.policy.attempts:
                    raise
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.policy.max_backoff)
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        await self.bot.session.close()
