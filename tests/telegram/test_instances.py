"""R14.2 scale-out: two instances on one database (PostgreSQL, and SQLite too) never poll at
once (no 409 from Telegram), and when the polling one stops, or dies without a word, the
other takes over within 15 s and goes on from the same update offset."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator

import pytest

from evacore.channels.telegram.channel import TelegramChannel
from evacore.config import Settings
from evacore.core import Core, start_core
from evacore.store import telegram as store
from tests.fakes.telegram import FakeBotApi
from tests.fakes.upstream import FakeUpstream
from tests.telegram.conftest import MASTER, MASTER_ID, make_channel
from tests.telegram.helpers import answers_after

pytestmark = pytest.mark.both_backends
TAKEOVER = 15.0


@pytest.fixture
async def second_core(core: Core, settings: Settings) -> AsyncIterator[Core]:
    other = settings.model_copy(update={"instance_id": "telegram-b",
                                        "data_dir": settings.data_dir.parent / "data-b"})
    c = await start_core(other)
    try:
        yield c
    finally:
        await c.aclose()


def channel_for(core: Core, bot_api: FakeBotApi) -> TelegramChannel:
    """Production timings for the lease (10 s, renewed every 3 s); short polls."""
    return make_channel(core, bot_api, lease_seconds=10.0, renew_every=3.0)


async def watch(channels: list[TelegramChannel], seconds: float) -> set[int]:
    """Sample who polls for `seconds`; fails the moment two do. Returns who polled."""
    seen: set[int] = set()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        polling = [i for i, ch in enumerate(channels) if ch.poller.polling.is_set()]
        assert len(polling) <= 1, "two instances poll at once"
        seen.update(polling)
        await asyncio.sleep(0.02)
    return seen


async def takeover(channels: list[TelegramChannel], new: int) -> float:
    start = time.monotonic()
    while not channels[new].poller.polling.is_set():
        assert time.monotonic() - start < TAKEOVER + 1, "no instance took over"
        polling = [ch for ch in channels if ch.poller.polling.is_set()]
        assert len(polling) <= 1
        await asyncio.sleep(0.02)
    return time.monotonic() - start


def assert_never_overlapped(bot_api: FakeBotApi) -> None:
    assert bot_api.conflicts == 0
    polls = sorted(bot_api.polls, key=lambda c: c.at)
    for a, b in itertools.pairwise(polls):
        assert a.ended is not None and a.ended <= b.at, "two getUpdates were open at once"


async def test_r14_2_two_instances_never_poll_at_once_and_take_over_from_each_other(
    core: Core, second_core: Core, bot_api: FakeBotApi, upstream: FakeUpstream,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, b = channel_for(core, bot_api), channel_for(second_core, bot_api)
    await a.start()
    await b.start()
    channels = [a, b]
    try:
        await bot_api.wait_for(lambda: a.poller.polling.is_set() or b.poller.polling.is_set())
        assert await watch(channels, 4.0) in ({0}, {1})
        holder = 0 if a.poller.polling.is_set() else 1
        mid = bot_api.say(MASTER_ID, MASTER, "First")["message_id"]
        upstream.script.reply(f"One. ↩ #{mid}")
        await answers_after(bot_api, MASTER_ID)

        # the polling instance stops: it lets the lease go, the other takes over at once
        await channels[holder].stop()
        took = await takeover(channels, 1 - holder)
        assert took < TAKEOVER
        mid = bot_api.say(MASTER_ID, MASTER, "Second")["message_id"]
        upstream.script.reply(f"Two. ↩ #{mid}")
        await answers_after(bot_api, MASTER_ID)

        # the stopped one comes back as a standby
        channels[holder] = channel_for(core if holder == 0 else second_core, bot_api)
        await channels[holder].start()
        assert await watch(channels, 3.5) == {1 - holder}

        # the polling one dies without a word (no release): its lease runs out
        monkeypatch.setattr(store, "release_lease", _no_release)
        await channels[1 - holder].stop()
        monkeypatch.undo()
        took = await takeover(channels, holder)
        assert 5.0 < took < TAKEOVER  # it waited for the lease to run out, not longer
        mid = bot_api.say(MASTER_ID, MASTER, "Third")["message_id"]
        upstream.script.reply(f"Three. ↩ #{mid}")
        await answers_after(bot_api, MASTER_ID)
    finally:
        for ch in channels:
            await ch.stop()
    assert [m["text"] for m in bot_api.sent(MASTER_ID)] == ["One.", "Two.", "Three."]
    assert_never_overlapped(bot_api)
    assert not [c for c in bot_api.calls if c.status == 409]


async def _no_release(*args: object, **kwargs: object) -> None:
    return None
