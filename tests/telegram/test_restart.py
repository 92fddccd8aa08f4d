"""R14.2: an answer saved while Telegram could not take it is delivered after a restart of
evacore, from the first part not yet sent, and nothing is sent twice."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from evacore.config import Settings
from evacore.core import Core, start_core
from evacore.server.app import create_app
from tests.conftest import MASTER_TOKEN, wipe
from tests.fakes.telegram import FakeBotApi
from tests.fakes.upstream import FakeUpstream
from tests.generate.helpers import fake_connection
from tests.telegram.conftest import MASTER, MASTER_ID, make_channel
from tests.telegram.helpers import outbox, settled, wait_sent


@pytest.fixture
async def first_life(settings: Settings, openai_fake: FakeUpstream) -> AsyncIterator[Core]:
    await wipe(settings.db_url)
    core = await start_core(settings)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(core=core)),
                                 base_url="http://evacore.test",
                                 headers={"Authorization": f"Bearer {MASTER_TOKEN}"}) as c:
        await fake_connection(c, openai_fake, name="up", params={"retries": 0})
    try:
        yield core
    finally:
        await core.aclose()


async def test_r14_2_an_answer_saved_while_telegram_failed_is_delivered_once_after_a_restart(
    settings: Settings, first_life: Core, bot_api: FakeBotApi, openai_fake: FakeUpstream
) -> None:
    core = first_life
    channel = make_channel(core, bot_api, sweep_every=3600)  # no second try in this life
    await channel.start()
    mid = bot_api.say(MASTER_ID, MASTER, "Write me three long paragraphs")["message_id"]
    paragraphs = [f"Part {i}: " + " ".join(["ipsum"] * 600) for i in range(3)]
    openai_fake.script.reply("\n\n".join(paragraphs) + f"\n↩ #{mid}")
    # the first part goes out, then Telegram drops every connection
    bot_api.fail("sendMessage", 0, times=1000, after=1)
    await bot_api.wait_for(lambda: len([c for c in bot_api.calls
                                        if c.method == "sendMessage"]) >= 4)
    await bot_api.wait_for(lambda: not channel.outbox.busy)
    rows = await outbox(core)
    assert [(r.status, r.parts_sent, r.attempts) for r in rows] == [("pending", 1, 1)]
    assert len(bot_api.sent(MASTER_ID)) == 1
    await channel.stop()
    await core.aclose()

    bot_api.faults.clear()  # Telegram is back; evacore starts again on the same database
    core = await start_core(settings)
    try:
        channel = make_channel(core, bot_api)
        await channel.start()
        try:
            await wait_sent(bot_api, MASTER_ID, 3)
            await settled(core)
            await asyncio.sleep(1.5)  # more sweeps: nothing more is sent
        finally:
            await channel.stop()
        rows = await outbox(core)
    finally:
        await core.aclose()
    sent = bot_api.sent(MASTER_ID)
    assert [m["text"] for m in sent] == paragraphs  # each part once, in order
    assert sent[0]["reply_parameters"]["message_id"] == mid
    assert [(r.status, r.parts_sent) for r in rows] == [("sent", 3)]
    assert rows[0].sent_ids == [m["message_id"] for m in sent]
