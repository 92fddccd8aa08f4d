"""Fixtures for the Telegram channel tests: the fake Bot API (loopback, real HTTP) that the
real aiogram client talks to, the fake model upstream as the connection `up`, and a started
channel with short timings (polling every second, fast retries)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from evacore.channels.telegram.api import RetryPolicy
from evacore.channels.telegram.channel import TelegramChannel
from evacore.config import TelegramSettings
from evacore.core import Core
from evacore.server.app import create_app
from tests.conftest import MASTER_TOKEN
from tests.fakes.fixtures import openai_fake  # noqa: F401 - fixtures are found by name
from tests.fakes.telegram import TOKEN, FakeBotApi, user
from tests.fakes.upstream import FakeUpstream
from tests.generate.helpers import fake_connection

MASTER_ID = 1001
TRUSTED_ID = 2002
STRANGER_ID = 3003
MASTER = user(MASTER_ID, "Max", username="max")
TRUSTED = user(TRUSTED_ID, "Tina")
STRANGER = user(STRANGER_ID, "Sam")
FAST = RetryPolicy(attempts=3, backoff=0.01, max_backoff=0.05)


@pytest.fixture
def bot_api() -> Iterator[FakeBotApi]:
    with FakeBotApi() as fake:
        yield fake


@pytest.fixture
async def client(core: Core) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(core=core)),
                                 base_url="http://evacore.test",
                                 headers={"Authorization": f"Bearer {MASTER_TOKEN}"},
                                 timeout=30) as c:
        yield c


@pytest.fixture
async def upstream(client: httpx.AsyncClient, openai_fake: FakeUpstream) -> FakeUpstream:  # noqa: F811
    """The fake model upstream behind the connection `up`, which Telegram chats use."""
    await fake_connection(client, openai_fake, name="up", params={"retries": 0})
    return openai_fake


def tg_settings(bot_api: FakeBotApi, **fields: Any) -> TelegramSettings:
    values: dict[str, Any] = {"token": TOKEN, "api_url": bot_api.url,
                              "master_ids": [MASTER_ID], "trusted_ids": [TRUSTED_ID],
                              "connection": "up"}
    values.update(fields)
    return TelegramSettings(**values)


def make_channel(core: Core, bot_api: FakeBotApi, **fields: Any) -> TelegramChannel:
    timings = {k: fields.pop(k) for k in ("lease_seconds", "renew_every", "sweep_every",
                                         "draft_every", "typing_every", "policy")
               if k in fields}
    return TelegramChannel(core, tg_settings(bot_api, **fields), poll_timeout=1,
                           **{"lease_seconds": 3.0, "renew_every": 0.5, "sweep_every": 0.5,
                              "policy": FAST, **timings})


@pytest.fixture
async def channel(core: Core, bot_api: FakeBotApi,
                  upstream: FakeUpstream) -> AsyncIterator[TelegramChannel]:
    ch = make_channel(core, bot_api)
    await ch.start()
    try:
        yield ch
    finally:
        await ch.stop()
