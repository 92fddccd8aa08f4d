"""R14.2 through the fake Bot API and the fake model: the seeded Telegram rules at work
(reply tail, Markdown images), Markdown as entities, long answers split, flood control."""

from __future__ import annotations

import asyncio
from typing import Any

from evacore.channels.telegram.api import RetryPolicy
from evacore.channels.telegram.channel import TelegramChannel
from evacore.core import Core
from tests.fakes.script import Reply
from tests.fakes.telegram import FakeBotApi
from tests.fakes.upstream import FakeUpstream
from tests.telegram.conftest import MASTER, MASTER_ID, make_channel
from tests.telegram.helpers import answers_after, chat_of, settled, stored


async def test_r14_2_a_tailless_answer_is_discarded_and_the_retry_replies_to_the_message(
    core: Core, bot_api: FakeBotApi, upstream: FakeUpstream, channel: TelegramChannel
) -> None:
    asked = bot_api.say(MASTER_ID, MASTER, "Will it rain today?")
    mid = asked["message_id"]
    upstream.script.reply("No tail on this answer at all", token_delay=0.01)
    upstream.script.reply(f"Rain after noon, take an umbrella. ↩ #{mid}", token_delay=0.01)
    sent = await answers_after(bot_api, MASTER_ID)
    texts = [m["text"] for m in sent]
    assert "Rain after noon, take an umbrella." in texts
    answer = next(m for m in sent if m["text"].startswith("Rain after noon"))
    assert answer["reply_parameters"]["message_id"] == mid
    assert "↩" not in answer["text"]
    assert texts == ["Rain after noon, take an umbrella."]
    assert all("No tail" not in str(c.params) for c in bot_api.calls)
    assert not bot_api.of("sendMessageDraft")
    assert not bot_api.of("editMessageText")
    # the retry was told why (the rule's interrupt went to the model, not to the chat)
    assert "reply tail" in str(upstream.generation_requests[-1].json["messages"][-1])
    chat = await chat_of(core, MASTER_ID)
    assert chat is not None
    history = await stored(core, chat)
    assert history == [("user", f"#{mid} Will it rain today?"),
                       ("assistant", f"Rain after noon, take an umbrella. ↩ #{mid}")]


async def test_r14_2_a_markdown_image_never_reaches_the_chat(
    bot_api: FakeBotApi, upstream: FakeUpstream, channel: TelegramChannel
) -> None:
    asked = bot_api.say(MASTER_ID, MASTER, "Show me a cat")
    mid = asked["message_id"]
    upstream.script.reply(f"Here: ![a cat](https://cats.example/cat.png) ↩ #{mid}")
    upstream.script.reply(f"Here is a cat:\nhttps://cats.example/cat.png ↩ #{mid}")
    sent = await answers_after(bot_api, MASTER_ID)
    assert len(upstream.generation_requests) == 2
    assert sent[-1]["text"] == "Here is a cat:\nhttps://cats.example/cat.png"
    for call in bot_api.calls:
        assert "![" not in str(call.params) and "a cat]" not in str(call.params)


async def test_r14_2_bold_and_code_arrive_as_entities_without_parse_mode(
    bot_api: FakeBotApi, upstream: FakeUpstream, channel: TelegramChannel
) -> None:
    mid = bot_api.say(MASTER_ID, MASTER, "Format test")["message_id"]
    upstream.script.reply(f"This is **bold** and `code`, and _this_ too. ↩ #{mid}")
    sent = (await answers_after(bot_api, MASTER_ID))[-1]
    assert sent["text"] == "This is bold and code, and this too."
    assert "parse_mode" not in sent
    kinds = {(e["type"], sent["text"][e["offset"]:e["offset"] + e["length"]])
             for e in sent["entities"]}
    assert {("bold", "bold"), ("code", "code"), ("italic", "this")} <= kinds


async def test_r14_2_a_9000_character_answer_arrives_in_three_messages_split_at_paragraph_ends(
    core: Core, bot_api: FakeBotApi, upstream: FakeUpstream, channel: TelegramChannel
) -> None:
    mid = bot_api.say(MASTER_ID, MASTER, "Tell me a long story")["message_id"]
    paragraphs = [f"Paragraph {i}: " + " ".join(["lorem"] * 165) + "." for i in range(9)]
    body = "\n\n".join(paragraphs)
    assert len(body) >= 9000
    upstream.script.reply(body + f"\n↩ #{mid}", chunks=[body[i:i + 500] for i in range(
        0, len(body), 500)] + [f"\n↩ #{mid}"])
    sent = await answers_after(bot_api, MASTER_ID, count=3)
    assert len(sent) >= 3
    assert all(len(m["text"].encode("utf-16-le")) // 2 <= 4096 for m in sent)
    joined = []
    for m in sent:
        pieces = m["text"].split("\n\n")
        assert all(p in paragraphs for p in pieces), "a message ends inside a paragraph"
        joined += pieces
    assert joined == paragraphs
    assert sent[0]["reply_parameters"]["message_id"] == mid
    assert all("reply_parameters" not in m for m in sent[1:])
    rows = await settled(core)
    assert [(r.status, r.parts_sent) for r in rows] == [("sent", len(sent))]


async def through_flood_control(bot_api: FakeBotApi, upstream: FakeUpstream, retry_after: int,
                                answer: str) -> tuple[list[Any], list[dict[str, Any]]]:
    """A question whose answer's first send meets a 429: (the sendMessage calls, the sent)."""
    bot_api.fail("sendMessage", 429, retry_after=retry_after)
    mid = bot_api.say(MASTER_ID, MASTER, "A question")["message_id"]
    upstream.script.reply(f"{answer} ↩ #{mid}")
    sent = await answers_after(bot_api, MASTER_ID)
    tries = [c for c in bot_api.calls if c.method == "sendMessage"]
    assert [c.status for c in tries] == [429, 200]
    return tries, sent


async def test_r14_2_flood_control_is_waited_out_and_the_answer_arrives_once(
    bot_api: FakeBotApi, upstream: FakeUpstream, channel: TelegramChannel
) -> None:
    tries, sent = await through_flood_control(bot_api, upstream, 1, "Quick answer.")
    assert tries[1].at - tries[0].at >= 0.95  # retry_after was honoured
    assert [m["text"] for m in sent] == ["Quick answer."]
    await asyncio.sleep(1.5)  # outbox sweeps come and go meanwhile: nothing is sent again
    assert len(bot_api.sent(MASTER_ID)) == 1


async def test_r14_2_network_errors_are_retried(
    bot_api: FakeBotApi, upstream: FakeUpstream, channel: TelegramChannel
) -> None:
    bot_api.fail("sendMessage", 0, times=2)  # two dropped connections
    mid = bot_api.say(MASTER_ID, MASTER, "Are you there?")["message_id"]
    upstream.script.add(Reply(text=f"Yes. ↩ #{mid}"))
    sent = await answers_after(bot_api, MASTER_ID)
    assert [m["text"] for m in sent] == ["Yes."]
    assert [c.status for c in bot_api.calls if c.method == "sendMessage"] == [599, 599, 200]


async def test_r14_2_a_refusal_is_not_retried_and_the_answer_is_marked_failed(
    core: Core, bot_api: FakeBotApi, upstream: FakeUpstream, channel: TelegramChannel
) -> None:
    bot_api.fail("sendMessage", 403, "Forbidden: bot was blocked by the user")
    mid = bot_api.say(MASTER_ID, MASTER, "Bye")["message_id"]
    upstream.script.reply(f"Goodbye. ↩ #{mid}")
    await bot_api.wait_for(lambda: [c for c in bot_api.calls if c.method == "sendMessage"])
    rows = await settled(core)
    await asyncio.sleep(1.2)  # two outbox sweeps: the refused answer is not tried again
    assert [c.status for c in bot_api.calls if c.method == "sendMessage"] == [403]
    assert [(r.status, r.error) for r in rows] == [
        ("failed", "Telegram server says - Forbidden: bot was blocked by the user")]


async def test_r14_2_entities_telegram_refuses_are_dropped_and_the_text_still_arrives(
    bot_api: FakeBotApi, upstream: FakeUpstream, channel: TelegramChannel
) -> None:
    bot_api.fail("sendMessage", 400, "Bad Request: can't parse entities: unsupported")
    mid = bot_api.say(MASTER_ID, MASTER, "Format")["message_id"]
    upstream.script.reply(f"Some **bold** words. ↩ #{mid}")
    sent = await answers_after(bot_api, MASTER_ID)
    assert sent[-1]["text"] == "Some bold words." and "entities" not in sent[-1]
    assert sent[-1]["reply_parameters"]["message_id"] == mid


async def test_r14_2_typing_is_renewed_while_a_tour_runs(
    core: Core, bot_api: FakeBotApi, upstream: FakeUpstream
) -> None:
    from tests.telegram.conftest import make_channel

    channel = make_channel(core, bot_api, typing_every=0.5)
    await channel.start()
    try:
        mid = bot_api.say(MASTER_ID, MASTER, "Think hard")["message_id"]
        upstream.script.add(Reply(text=f"Done thinking. ↩ #{mid}", first_token_delay=2.0))
        await answers_after(bot_api, MASTER_ID)
    finally:
        await channel.stop()
    typing = bot_api.of("sendChatAction")
    assert len(typing) >= 4 and all(c.params["action"] == "typing" for c in typing)
    assert typing[-1].at <= bot_api.of("sendMessage")[-1].at


async def test_r14_2_an_update_this_aiogram_cannot_read_is_skipped_and_the_next_answered(
    core: Core, bot_api: FakeBotApi, upstream: FakeUpstream, channel: TelegramChannel
) -> None:
    """A newer Bot API may send a field variant aiogram does not know: that one update is
    skipped (the offset moves past it), the updates after it are answered."""
    odd = bot_api.message(MASTER_ID, MASTER, "forwarded from the future")
    odd["forward_origin"] = {"type": "future_origin", "date": 1}
    bot_api.push({"message": odd})
    mid = bot_api.say(MASTER_ID, MASTER, "Are you there?")["message_id"]
    upstream.script.reply(f"Yes. ↩ #{mid}")
    sent = await answers_after(bot_api, MASTER_ID)
    assert [m["text"] for m in sent] == ["Yes."]
    chat = await chat_of(core, MASTER_ID)
    assert chat is not None
    assert await stored(core, chat) == [("user", f"#{mid} Are you there?"),
                                        ("assistant", f"Yes. ↩ #{mid}")]
    await bot_api.wait_for(lambda: not bot_api.updates)  # both were confirmed


async def test_r14_2_a_flood_wait_too_long_to_wait_in_one_go_is_kept_by_the_outbox(
    core: Core, bot_api: FakeBotApi, upstream: FakeUpstream
) -> None:
    """A `retry_after` longer than a call waits in one go ends the call; the outbox then
    tries again no sooner than Telegram asked, whatever its own backoff says."""
    ch = make_channel(core, bot_api, policy=RetryPolicy(attempts=3, backoff=0.01,
                                                       max_backoff=0.05, max_retry_after=1.0))
    ch.outbox.max_backoff = 0.2  # its own schedule alone would try again in 0.2 s
    await ch.start()
    try:
        tries, sent = await through_flood_control(bot_api, upstream, 3, "Very.")
        assert tries[1].at - tries[0].at >= 2.9
        assert [m["text"] for m in sent] == ["Very."]
    finally:
        await ch.stop()


async def test_r14_2_a_connection_setting_that_names_nothing_is_said_not_kept_silent(
    core: Core, bot_api: FakeBotApi, upstream: FakeUpstream
) -> None:
    from tests.telegram.conftest import TRUSTED, TRUSTED_ID

    channel = make_channel(core, bot_api, connection="no such connection")
    await channel.start()
    try:
        bot_api.say(MASTER_ID, MASTER, "Hello?")
        to_master = await answers_after(bot_api, MASTER_ID)
        bot_api.say(TRUSTED_ID, TRUSTED, "Anyone there?")
        to_trusted = await answers_after(bot_api, TRUSTED_ID)
    finally:
        await channel.stop()
    assert "telegram.connection 'no such connection' names no connection" in (
        to_master[-1]["text"])
    assert to_trusted[-1]["text"].startswith("⚠ This bot is not set up")
    assert "no such connection" not in to_trusted[-1]["text"]
    assert await chat_of(core, MASTER_ID) is None  # nothing half made
    assert upstream.generation_requests == []
