from __future__ import annotations

from evacore.channels.telegram.channel import TelegramChannel
from evacore.core import Core
from tests.fakes.telegram import FakeBotApi
from tests.fakes.upstream import FakeUpstream
from tests.telegram.conftest import MASTER, MASTER_ID
from tests.telegram.helpers import answers_after, chat_of, stored
from tests.rules_integration.helpers import clear_rules


async def test_smoke(core: Core, bot_api: FakeBotApi, upstream: FakeUpstream,
                     channel: TelegramChannel) -> None:
    await clear_rules(core)
    upstream.script.reply("Hello **there**")
    msg = bot_api.say(MASTER_ID, MASTER, "Hi")
    sent = await answers_after(bot_api, MASTER_ID)
    print(sent, [c.method for c in bot_api.calls][:20])
    chat = await chat_of(core, MASTER_ID)
    print(await stored(core, chat))
    print(upstream.generation_requests[-1].json["messages"])
