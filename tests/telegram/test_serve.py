"""R14.2: the channel runs inside the server when a token is set and stops with it; webhook
mode sets the webhook and takes updates only with the right secret header."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from sqlalchemy import func, select

from evacore.channels.telegram.channel import TelegramChannel
from evacore.channels.telegram.webhook import SECRET_HEADER
from evacore.config import Settings, TelegramSettings
from evacore.core import Core
from evacore.server.app import create_app
from evacore.store.db import Database, create_engine
from evacore.store.tables import Message, TelegramLease
from tests.conftest import MASTER_TOKEN, wipe
from tests.fakes.telegram import FakeBotApi
from tests.fakes.upstream import FakeUpstream
from tests.generate.helpers import fake_connection
from tests.telegram.conftest import MASTER, MASTER_ID, make_channel, tg_settings
from tests.telegram.helpers import answers_after, count_chats

HOOK = "https://eva.example.org/v1/telegram/webhook"
SECRET = "s3cret-Token_42"


async def test_r14_2_the_channel_starts_with_the_server_when_a_token_is_set_and_stops_with_it(
    settings: Settings, bot_api: FakeBotApi, openai_fake: FakeUpstream
) -> None:
    await wipe(settings.db_url)
    configured = settings.model_copy(update={"telegram": tg_settings(bot_api)})
    app = create_app(configured)
    async with app.router.lifespan_context(app):
        channel = app.state.telegram
        assert isinstance(channel, TelegramChannel)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://evacore.test",
                                     headers={"Authorization": f"Bearer {MASTER_TOKEN}"}) as c:
            await fake_connection(c, openai_fake, name="up", params={"retries": 0})
        await bot_api.wait_for(lambda: bot_api.of("getUpdates"))
        mid = bot_api.say(MASTER_ID, MASTER, "Are you running?")["message_id"]
        openai_fake.script.reply(f"Yes, inside the server. ↩ #{mid}")
        sent = await answers_after(bot_api, MASTER_ID)
        assert sent[-1]["text"] == "Yes, inside the server."
        core: Core = app.state.core
        async with core.session() as s:
            lease = await s.get(TelegramLease, "polling")
            assert lease is not None and lease.holder == core.instance_id
    assert app.state.telegram is None
    db = Database(create_engine(settings.db_url))
    try:
        async with db.session() as s:
            lease = await s.get(TelegramLease, "polling")
            assert lease is not None and lease.holder is None  # let go for another instance
    finally:
        await db.engine.dispose()
    polls = len(bot_api.polls)
    await asyncio.sleep(1.5)
    assert len(bot_api.polls) == polls  # stopped: no more getUpdates
    assert all(p.ended is not None for p in bot_api.polls)


async def test_r14_2_without_a_token_no_channel_runs(settings: Settings, bot_api: FakeBotApi) -> None:
    await wipe(settings.db_url)
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        assert app.state.telegram is None
    assert bot_api.calls == []


def test_r14_2_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in (("TOKEN", "42:abc"), ("MASTER_IDS", "1, 22"),
                        ("TRUSTED_IDS", "[333, 4444]"), ("GUESTS", "true"),
                        ("MODE", "webhook"), ("WEBHOOK_URL", HOOK),
                        ("WEBHOOK_SECRET", SECRET)):
        monkeypatch.setenv(f"EVACORE_TELEGRAM__{name}", value)
    t = Settings().telegram
    assert t.token is not None and t.token.get_secret_value() == "42:abc"
    assert (t.master_ids, t.trusted_ids, t.guests, t.mode) == ([1, 22], [333, 4444], True,
                                                                "webhook")
    assert t.api_url == "https://api.telegram.org"
    for bad in ({"mode": "push"}, {"master_ids": "one,two"},
                {"mode": "webhook", "token": "1:a"},  # webhook without URL and secret
                {"webhook_secret": "spaces are not allowed"}):
        try:
            TelegramSettings(**bad)
        except ValueError:
            continue
        raise AssertionError(f"accepted {bad}")


async def test_r14_2_webhook_mode_sets_the_webhook_and_checks_the_secret(
    core: Core, bot_api: FakeBotApi, upstream: FakeUpstream
) -> None:
    channel = make_channel(core, bot_api, mode="webhook", webhook_url=HOOK,
                           webhook_secret=SECRET)
    await channel.start()
    app = create_app(core=core)
    app.state.telegram = channel
    try:
        hook = bot_api.of("setWebhook")[-1].params
        assert hook["url"] == HOOK and hook["secret_token"] == SECRET
        assert hook["allowed_updates"] == ["message"]
        chats = await count_chats(core)
        update = bot_api.update(bot_api.message(MASTER_ID, MASTER, "Hello via webhook"))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://evacore.test") as c:
            for headers in ({}, {SECRET_HEADER: "wrong"}, {SECRET_HEADER: SECRET + "x"}):
                r = await c.post("/v1/telegram/webhook", json=update, headers=headers)
                assert r.status_code == 403, r.text
            r = await c.post("/v1/telegram/webhook", content=b"{not json",
                             headers={SECRET_HEADER: SECRET})
            assert r.status_code == 400
            r = await c.post("/v1/telegram/webhook", json={"message": "no update id"},
                             headers={SECRET_HEADER: SECRET})
            assert r.status_code == 400
            # an update this aiogram cannot read: taken (200), or Telegram sends it forever
            odd = bot_api.update(bot_api.message(MASTER_ID, MASTER, "from the future"))
            odd["message"]["forward_origin"] = {"type": "future_origin", "date": 1}
            r = await c.post("/v1/telegram/webhook", json=odd, headers={SECRET_HEADER: SECRET})
            assert r.status_code == 200, r.text
            assert await count_chats(core) == chats  # nothing was stored
            async with core.session() as s:
                assert await s.scalar(select(func.count()).select_from(Message)) == 0
            upstream.script.reply(f"Hello! ↩ #{update['message']['message_id']}")
            r = await c.post("/v1/telegram/webhook", json=update,
                             headers={SECRET_HEADER: SECRET})
            assert r.status_code == 200, r.text
            await answers_after(bot_api, MASTER_ID)
            asked = len(upstream.generation_requests)
            # Telegram delivers an update again when it missed the answer: no second tour
            r = await c.post("/v1/telegram/webhook", json=update,
                             headers={SECRET_HEADER: SECRET})
            assert r.status_code == 200
            await asyncio.sleep(1.0)
        assert len(upstream.generation_requests) == asked
        assert [m["text"] for m in bot_api.sent(MASTER_ID)] == ["Hello!"]
        assert bot_api.of("getUpdates") == []  # webhook mode never polls
    finally:
        await channel.stop()


async def test_r14_2_the_webhook_route_is_404_without_a_webhook_channel(core: Core) -> None:
    app = create_app(core=core)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://evacore.test") as c:
        r = await c.post("/v1/telegram/webhook", json={"update_id": 1},
                         headers={SECRET_HEADER: SECRET})
    assert r.status_code == 404


async def test_r14_2_polling_clears_a_webhook_left_set_so_telegram_never_answers_409(
    core: Core, bot_api: FakeBotApi, upstream: FakeUpstream
) -> None:
    bot_api.webhook = {"url": HOOK, "secret_token": SECRET}  # left by an earlier webhook setup
    channel = make_channel(core, bot_api)
    await channel.start()
    try:
        mid = bot_api.say(MASTER_ID, MASTER, "Polling again")["message_id"]
        upstream.script.reply(f"Polling works. ↩ #{mid}")
        sent = await answers_after(bot_api, MASTER_ID)
    finally:
        await channel.stop()
    assert sent[-1]["text"] == "Polling works."
    methods = [c.method for c in bot_api.calls]
    assert methods.index("deleteWebhook") < methods.index("getUpdates")
    assert not [c for c in bot_api.calls if c.status == 409]


async def test_r14_2_a_token_telegram_refuses_is_a_clear_error(core: Core, bot_api: FakeBotApi) -> None:
    channel = TelegramChannel(core, tg_settings(bot_api, token="42:wrong-token"))
    with pytest.raises(RuntimeError, match="refused telegram.token"):
        await channel.start()
    assert "telegram" not in core.tool_services
    assert channel.outbox.save_hook not in core.save_hooks


async def test_r14_2_telegram_out_of_reach_at_start_is_tried_again_in_the_background(
    core: Core, bot_api: FakeBotApi, upstream: FakeUpstream
) -> None:
    bot_api.fail("getMe", 0, times=3)  # every try of the first boot: the connection drops
    channel = make_channel(core, bot_api)
    await channel.start()  # the server goes on starting
    try:
        assert channel.me is None
        await bot_api.wait_for(lambda: channel.poller.polling.is_set(), timeout=10)
        mid = bot_api.say(MASTER_ID, MASTER, "Back?")["message_id"]
        upstream.script.reply(f"Back. ↩ #{mid}")
        sent = await answers_after(bot_api, MASTER_ID)
    finally:
        await channel.stop()
    assert sent[-1]["text"] == "Back."


def test_r14_2_every_setting_is_documented() -> None:
    from pathlib import Path

    doc = (Path(__file__).parents[2] / "docs" / "telegram.md").read_text(encoding="utf-8")
    for name in TelegramSettings.model_fields:
        assert f"| `{name.upper()}` |" in doc, f"docs/telegram.md lacks {name.upper()}"
