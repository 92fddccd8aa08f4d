"""R14.2: `telegram_react` → setMessageReaction (an emoji off Telegram's list is a tool
error), photos for vision and blind connections, media markers, and drafts that grow at
most once a second, only while no text rule is armed."""

from __future__ import annotations

import itertools

import httpx

from evacore.channels.telegram.channel import TelegramChannel
from evacore.core import Core
from tests.fakes.script import Reply
from tests.fakes.telegram import FakeBotApi
from tests.fakes.upstream import FakeUpstream
from tests.generate.helpers import fake_connection
from tests.rules_integration.helpers import clear_rules
from tests.telegram.conftest import MASTER, MASTER_ID, make_channel
from tests.telegram.helpers import answers_after, chat_of, last_tour_env, settled


def tool_results(upstream: FakeUpstream, index: int) -> list[str]:
    return [str(m.get("content")) for m in upstream.generation_requests[index].json["messages"]
            if m.get("role") == "tool"]


async def test_r14_2_a_bare_emoji_answer_is_discarded_and_the_reaction_is_set(
    core: Core, bot_api: FakeBotApi, upstream: FakeUpstream, channel: TelegramChannel
) -> None:
    mid = bot_api.say(MASTER_ID, MASTER, "I passed my exam!")["message_id"]
    upstream.script.reply(f"🎉 ↩ #{mid}")
    upstream.script.tool_call("telegram_react", {"message_id": mid, "emoji": "🎉"})
    upstream.script.reply("")
    await bot_api.wait_for(lambda: bot_api.of("setMessageReaction"))
    reaction = bot_api.of("setMessageReaction")[0].params
    assert int(reaction["chat_id"]) == MASTER_ID and int(reaction["message_id"]) == mid
    assert reaction["reaction"] == [{"type": "emoji", "emoji": "🎉"}]
    await settled(core)
    assert "reacted 🎉" in tool_results(upstream, 2)[0]
    assert bot_api.sent(MASTER_ID) == []  # the emoji was never sent as a message
    assert not bot_api.of("sendMessageDraft")


async def test_r14_2_an_emoji_telegram_does_not_allow_is_a_tool_error(
    bot_api: FakeBotApi, upstream: FakeUpstream, channel: TelegramChannel
) -> None:
    mid = bot_api.say(MASTER_ID, MASTER, "Look at my dinosaur")["message_id"]
    upstream.script.tool_call("telegram_react", {"message_id": mid, "emoji": "🦖"})
    upstream.script.reply(f"What a dinosaur! ↩ #{mid}")
    sent = await answers_after(bot_api, MASTER_ID)
    assert sent[-1]["text"] == "What a dinosaur!"
    assert not [c for c in bot_api.calls if c.method == "setMessageReaction"]
    result = tool_results(upstream, 1)[0]
    assert "error" in result and "Telegram does not allow 🦖" in result


async def test_r14_2_a_photo_reaches_a_vision_connection_as_an_image(
    core: Core, client: httpx.AsyncClient, bot_api: FakeBotApi, upstream: FakeUpstream
) -> None:
    await fake_connection(client, upstream, name="eye", vision=True, params={"retries": 0})
    small = bot_api.add_file(b"small-thumbnail", "photos/small.jpg")
    big = bot_api.add_file(path="photos/big.png")
    channel = make_channel(core, bot_api, connection="eye")
    await channel.start()
    try:
        photo = [{"file_id": small, "file_unique_id": "s", "width": 90, "height": 60,
                  "file_size": 15},
                 {"file_id": big, "file_unique_id": "b", "width": 1280, "height": 960,
                  "file_size": 70}]
        mid = bot_api.say(MASTER_ID, MASTER, None, photo=photo, caption="What is this?")[
            "message_id"]
        upstream.script.reply(f"Sorry, I can't see images. ↩ #{mid}")
        upstream.script.reply(f"A single white pixel. ↩ #{mid}")
        sent = await answers_after(bot_api, MASTER_ID)
    finally:
        await channel.stop()
    assert [m["text"] for m in sent] == ["A single white pixel."]
    assert (await last_tour_env(core))["picture"] is True
    assert [c.params["file_id"] for c in bot_api.of("getFile")] == [big]
    user = upstream.generation_requests[0].json["messages"][-1]
    parts = user["content"]
    assert {"type": "text", "text": f"#{mid} What is this?"} in parts
    image = next(p for p in parts if p["type"] == "image_url")
    assert image["image_url"]["url"].startswith("data:image/png;base64,iVBORw0KGgo")
    # look_before_refusing discarded the refusal; the retry was told the picture is there
    assert len(upstream.generation_requests) == 2
    assert "you can see it" in str(upstream.generation_requests[1].json["messages"][-1])
    assert all("can't see" not in str(c.params) for c in bot_api.calls)


async def test_r14_2_a_blind_connection_gets_a_text_marker_and_voice_gets_one_too(
    bot_api: FakeBotApi, upstream: FakeUpstream, channel: TelegramChannel
) -> None:
    file_id = bot_api.add_file()
    photo = [{"file_id": file_id, "file_unique_id": "b", "width": 640, "height": 480}]
    mid = bot_api.say(MASTER_ID, MASTER, None, photo=photo, caption="My garden")["message_id"]
    upstream.script.reply(f"Tell me about it. ↩ #{mid}")
    await answers_after(bot_api, MASTER_ID)
    content = upstream.generation_requests[-1].json["messages"][-1]["content"]
    assert isinstance(content, str) and "image_url" not in str(content)
    assert content == (f"#{mid} [photo: this connection cannot see images, so it is not "
                       "shown] My garden")
    assert not bot_api.of("getFile")  # nothing is downloaded for a blind connection
    voice = {"file_id": "voice1", "file_unique_id": "v1", "duration": 7}
    mid = bot_api.say(MASTER_ID, MASTER, None, voice=voice)["message_id"]
    upstream.script.reply(f"I cannot listen yet. ↩ #{mid}")
    await answers_after(bot_api, MASTER_ID)
    assert upstream.generation_requests[-1].json["messages"][-1]["content"] == (
        f"#{mid} [voice message, 7 s, not transcribed]")


WORDS = " ".join(f"word{i}" for i in range(40))


async def test_r14_2_with_no_text_rule_armed_the_answer_grows_as_a_draft_once_a_second(
    core: Core, bot_api: FakeBotApi, upstream: FakeUpstream, channel: TelegramChannel
) -> None:
    await clear_rules(core)
    bot_api.say(MASTER_ID, MASTER, "Count slowly")
    upstream.script.add(Reply(text=WORDS, token_delay=0.08))  # about 3.2 s of streaming
    sent = await answers_after(bot_api, MASTER_ID)
    assert sent[-1]["text"] == WORDS
    drafts = bot_api.of("sendMessageDraft")
    assert len(drafts) >= 2
    gaps = [b.at - a.at for a, b in itertools.pairwise(drafts)]
    assert all(g >= 0.95 for g in gaps), gaps
    texts = [d.params["text"] for d in drafts]
    assert all(WORDS.startswith(t) for t in texts)
    assert all(len(a) < len(b) for a, b in itertools.pairwise(texts))
    assert len({d.params["draft_id"] for d in drafts}) == 1
    assert drafts[-1].at <= bot_api.of("sendMessage")[-1].at


async def test_r14_2_while_a_text_rule_is_armed_no_draft_is_shown(
    core: Core, bot_api: FakeBotApi, upstream: FakeUpstream, channel: TelegramChannel
) -> None:
    mid = bot_api.say(MASTER_ID, MASTER, "Count slowly")["message_id"]
    upstream.script.add(Reply(text=f"{WORDS} ↩ #{mid}", token_delay=0.05))
    sent = await answers_after(bot_api, MASTER_ID)
    assert sent[-1]["text"] == WORDS
    assert bot_api.of("sendMessageDraft") == []
    assert bot_api.of("sendChatAction")  # "typing" was shown meanwhile
    assert await chat_of(core, MASTER_ID) is not None
