"""R14.2: who gets an answer (master, trusted, guests only when on), with which tools, in
which chat (`/new`), and in groups only when the bot is mentioned or replied to."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from evacore.channels.telegram.channel import NEW_CHAT_TEXT, TelegramChannel
from evacore.core import Core
from evacore.logs import configure_logging
from evacore.store.tables import Message, TelegramChat, User
from tests.fakes.telegram import BOT_ID, BOT_USERNAME, FakeBotApi
from tests.fakes.upstream import FakeUpstream
from tests.telegram.conftest import (
    MASTER,
    MASTER_ID,
    STRANGER,
    STRANGER_ID,
    TRUSTED,
    TRUSTED_ID,
    make_channel,
)
from tests.telegram.helpers import answers_after, chat_of, count_chats, last_tour_env, stored

GROUP = -1001234567


def tool_names(upstream: FakeUpstream, index: int = -1) -> set[str]:
    body = upstream.generation_requests[index].json
    return {t["function"]["name"] for t in body.get("tools") or []}


async def test_r14_2_a_guest_is_ignored_and_nothing_of_theirs_is_stored(
    core: Core, bot_api: FakeBotApi, upstream: FakeUpstream, channel: TelegramChannel
) -> None:
    before = await count_chats(core)
    bot_api.say(STRANGER_ID, STRANGER, "my secret plan, please answer")
    mid = bot_api.say(MASTER_ID, MASTER, "Hello")["message_id"]
    upstream.script.reply(f"Hello, master. ↩ #{mid}")
    await answers_after(bot_api, MASTER_ID)  # updates are handled in order: the guest's first
    assert bot_api.sent(STRANGER_ID) == []
    assert not [c for c in bot_api.calls if str(c.params.get("chat_id")) == str(STRANGER_ID)]
    assert await count_chats(core) == before + 1  # the master's chat only
    async with core.session() as s:
        assert await s.get(TelegramChat, STRANGER_ID) is None
        assert (await s.scalars(select(User).where(User.telegram_id == STRANGER_ID))).first() \
            is None
        texts = (await s.scalars(select(Message.content))).all()
    assert not any("secret plan" in t for t in texts)
    assert all("secret plan" not in str(r.json) for r in upstream.generation_requests)


async def test_r14_2_with_guests_on_a_stranger_is_answered_as_a_guest(
    core: Core, bot_api: FakeBotApi, upstream: FakeUpstream
) -> None:
    channel = make_channel(core, bot_api, guests=True)
    await channel.start()
    try:
        mid = bot_api.say(STRANGER_ID, STRANGER, "Hi, who are you?")["message_id"]
        upstream.script.reply(f"I am Eva. ↩ #{mid}")
        sent = await answers_after(bot_api, STRANGER_ID)
    finally:
        await channel.stop()
    assert sent[-1]["text"] == "I am Eva."
    offered = tool_names(upstream)
    assert "telegram_react" in offered
    assert not offered & {"shell", "read_file", "list_dir", "write_file"}  # trusted and up
    async with core.session() as s:
        guest = (await s.scalars(select(User).where(User.telegram_id == STRANGER_ID))).one()
    assert guest.role == "guest"


async def test_r14_2_a_trusted_sender_is_answered_without_master_tools(
    core: Core, bot_api: FakeBotApi, upstream: FakeUpstream, channel: TelegramChannel
) -> None:
    mid = bot_api.say(TRUSTED_ID, TRUSTED, "Can you run ls for me?")["message_id"]
    upstream.script.reply(f"I cannot run commands for you. ↩ #{mid}")
    sent = await answers_after(bot_api, TRUSTED_ID)
    assert sent[-1]["text"] == "I cannot run commands for you."
    offered = tool_names(upstream)
    env = await last_tour_env(core)
    assert (env["telegram"], env["trusted"], env["master"]) == (True, True, False)
    assert "telegram_react" in offered and "read_file" in offered  # trusted tools
    assert not offered & {"shell", "write_file", "write_diff", "stream_rule_create"}
    # the master, for comparison, is offered the machine
    mid = bot_api.say(MASTER_ID, MASTER, "Run ls")["message_id"]
    upstream.script.reply(f"Sure. ↩ #{mid}")
    await answers_after(bot_api, MASTER_ID)
    assert {"shell", "write_file"} <= tool_names(upstream)
    env = await last_tour_env(core)
    assert (env["telegram"], env["trusted"], env["master"]) == (True, True, True)
    async with core.session() as s:
        trusted = (await s.scalars(select(User).where(User.telegram_id == TRUSTED_ID))).one()
    assert trusted.role == "trusted" and trusted.name == "Tina"


async def test_r14_2_new_starts_a_fresh_chat(
    core: Core, bot_api: FakeBotApi, upstream: FakeUpstream, channel: TelegramChannel
) -> None:
    mid = bot_api.say(MASTER_ID, MASTER, "My cat is called Tom.")["message_id"]
    upstream.script.reply(f"Noted. ↩ #{mid}")
    await answers_after(bot_api, MASTER_ID)
    first = await chat_of(core, MASTER_ID)
    new = bot_api.say(MASTER_ID, MASTER, "/new")
    sent = await answers_after(bot_api, MASTER_ID)
    assert sent[-1]["text"] == NEW_CHAT_TEXT
    assert sent[-1]["reply_parameters"]["message_id"] == new["message_id"]
    second = await chat_of(core, MASTER_ID)
    assert second is not None and second != first
    mid = bot_api.say(MASTER_ID, MASTER, "What is my cat called?")["message_id"]
    upstream.script.reply(f"I do not know yet. ↩ #{mid}")
    await answers_after(bot_api, MASTER_ID)
    assert "Tom" not in str(upstream.generation_requests[-1].json["messages"])
    assert await stored(core, second) == [
        ("user", f"#{mid} What is my cat called?"), ("assistant", f"I do not know yet. ↩ #{mid}")]
    assert len(await stored(core, first)) == 2  # the old chat is kept as it was


async def test_r14_2_in_a_group_the_bot_answers_only_when_mentioned_or_replied_to(
    core: Core, bot_api: FakeBotApi, upstream: FakeUpstream, channel: TelegramChannel
) -> None:
    group = {"chat_type": "supergroup", "title": "Family"}
    bot_api.say(GROUP, MASTER, "Dinner at eight, everyone", **group)
    bot_api.say(GROUP, TRUSTED, "@someone_else are you coming?", **group,
                entities=[{"type": "mention", "offset": 0, "length": 13}])
    mention = f"@{BOT_USERNAME}"
    asked = bot_api.say(GROUP, MASTER, f"{mention} what should we cook?", **group,
                        entities=[{"type": "mention", "offset": 0, "length": len(mention)}])
    upstream.script.reply(f"Pasta. ↩ #{asked['message_id']}")
    sent = await answers_after(bot_api, GROUP)
    assert [m["text"] for m in sent] == ["Pasta."]
    assert len(upstream.generation_requests) == 1
    seen = str(upstream.generation_requests[0].json["messages"])
    assert "Dinner at eight" not in seen and "are you coming" not in seen
    assert f"#{asked['message_id']} Max: {mention} what should we cook?" in seen
    # a reply to the bot's message is meant for it too, from anyone the channel knows
    bot_message = {"message_id": sent[0]["message_id"], "date": 0,
                   "chat": {"id": GROUP, "type": "supergroup", "title": "Family"},
                   "from": {"id": BOT_ID, "is_bot": True, "first_name": "Eva",
                            "username": BOT_USERNAME}, "text": "Pasta."}
    reply = bot_api.say(GROUP, TRUSTED, "With tomatoes?", **group, reply_to=bot_message)
    upstream.script.reply(f"Yes, with tomatoes. ↩ #{reply['message_id']}")
    sent = await answers_after(bot_api, GROUP)
    assert sent[-1]["text"] == "Yes, with tomatoes."
    assert f"#{reply['message_id']} Tina: (↩ #{sent[0]['message_id']}) With tomatoes?" in str(
        upstream.generation_requests[-1].json["messages"])
    chat = await chat_of(core, GROUP)
    assert chat is not None
    assert len(await stored(core, chat)) == 4  # one chat for the group, both speakers in it


@pytest.mark.parametrize("privacy", [True, False])
async def test_r14_2_the_log_says_what_privacy_mode_means_for_groups(
    core: Core, upstream: FakeUpstream, privacy: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    configure_logging("json", "INFO")  # the server's own set-up: JSON lines on stderr
    capsys.readouterr()
    with FakeBotApi(privacy=privacy) as fake:
        channel = make_channel(core, fake)
        await channel.start()
        await channel.stop()
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()
             if line.startswith("{")]
    said = [e for e in lines if e.get("event") == "telegram.groups"]
    assert len(said) == 1
    assert said[0]["privacy"] == ("on" if privacy else "off")
    assert ("only commands, mentions of it and replies to it" in said[0]["meaning"]) == privacy


async def test_r14_2_in_a_forum_topic_the_answer_goes_to_the_same_topic(
    bot_api: FakeBotApi, upstream: FakeUpstream, channel: TelegramChannel
) -> None:
    mention = f"@{BOT_USERNAME}"
    asked = bot_api.say(GROUP, MASTER, f"{mention} hello topic", chat_type="supergroup",
                        entities=[{"type": "mention", "offset": 0, "length": len(mention)}],
                        message_thread_id=77, is_topic_message=True)
    upstream.script.reply(f"Hello, topic. ↩ #{asked['message_id']}")
    sent = await answers_after(bot_api, GROUP)
    assert sent[-1]["text"] == "Hello, topic." and int(sent[-1]["message_thread_id"]) == 77
    assert all(int(c.params["message_thread_id"]) == 77 for c in bot_api.of("sendChatAction"))


async def test_r14_2_a_forum_topics_first_message_is_no_reply(
    bot_api: FakeBotApi, upstream: FakeUpstream, channel: TelegramChannel
) -> None:
    """Telegram sends every message of a forum topic as a reply to the topic's first
    (service) message: that is no reply to anyone, not even when the bot made the topic."""
    root = bot_api.message(GROUP, {"id": BOT_ID, "is_bot": True, "first_name": "Eva"},
                           chat_type="supergroup", message_thread_id=50, is_topic_message=True,
                           forum_topic_created={"name": "Plans", "icon_color": 7322096})
    root["message_id"] = 50
    plain = bot_api.say(GROUP, MASTER, "just chatting here", chat_type="supergroup",
                        message_thread_id=50, is_topic_message=True, reply_to=root)
    mention = f"@{BOT_USERNAME}"
    asked = bot_api.say(GROUP, MASTER, f"{mention} what now?", chat_type="supergroup",
                        entities=[{"type": "mention", "offset": 0, "length": len(mention)}],
                        message_thread_id=50, is_topic_message=True, reply_to=root)
    upstream.script.reply(f"Now this. ↩ #{asked['message_id']}")
    sent = await answers_after(bot_api, GROUP)
    assert [m["text"] for m in sent] == ["Now this."]
    assert len(upstream.generation_requests) == 1  # the unaddressed message got no tour
    said = str(upstream.generation_requests[-1].json["messages"])
    assert f"#{asked['message_id']} " in said and "↩ #50" not in said
    assert plain["message_id"] != asked["message_id"]
