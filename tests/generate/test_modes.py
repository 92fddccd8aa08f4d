"""R2.12, R2.14, R8.3 and reference §5: regenerate, swipe, continue, impersonate and the
assistant prefill, through the generate API against the fakes."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.fakes.script import Reply
from tests.fakes.upstream import FakeUpstream
from tests.generate.helpers import (
    deltas,
    fake_connection,
    generate,
    messages,
    names,
    new_chat,
    one,
    stream,
)


def _fake(request: pytest.FixtureRequest, kind: str) -> FakeUpstream:
    return request.getfixturevalue({
        "openai-chat": "openai_fake", "anthropic": "anthropic_fake",
        "openai-text": "openai_text_fake", "kobold": "kobold_fake"}[kind])


def _last_turn(fake: FakeUpstream) -> dict:
    return fake.last_body["messages"][-1]


def _text(message: dict) -> str:
    content = message["content"]
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content)
    return content


async def _chat_with_answer(client: httpx.AsyncClient, fake: FakeUpstream, answer: str,
                            **connection: object) -> tuple[str, dict]:
    chat = await new_chat(client, await fake_connection(client, fake, **connection))
    fake.script.reply(answer)
    events = await stream(client, chat, "Name a colour.")
    return chat, one(events, "message")


@pytest.mark.parametrize("mode", ["regenerate", "swipe"])
async def test_r2_14_regenerate_and_swipe_add_an_active_variant_and_keep_the_old(
    client: httpx.AsyncClient, openai_fake: FakeUpstream, mode: str
) -> None:
    chat, first = await _chat_with_answer(client, openai_fake, "Blue.")
    openai_fake.script.reply("Green.")
    events = await stream(client, chat, None, mode=mode)
    second = one(events, "message")
    assert second["message_id"] == first["message_id"]
    assert second["variant_id"] != first["variant_id"] and second["content"] == "Green."
    sent = openai_fake.last_body["messages"]
    assert sent[-1] == {"role": "user", "content": "Name a colour."}
    assert "Blue." not in json.dumps(sent)  # the answer being replaced is not in the prompt
    msgs = await messages(client, chat)
    assert [m["role"] for m in msgs] == ["user", "assistant"]
    assert msgs[1]["active_variant"] == second["variant_id"] and msgs[1]["content"] == "Green."
    assert [(v["id"], v["content"]) for v in msgs[1]["variants"]] == [
        (first["variant_id"], "Blue."), (second["variant_id"], "Green.")]


async def test_r2_14_regenerate_after_a_failed_answer_writes_a_new_answer(
    client: httpx.AsyncClient, openai_fake: FakeUpstream
) -> None:
    chat = await new_chat(client, await fake_connection(
        client, openai_fake, params={"retries": 0}))
    openai_fake.script.error(500, "down")
    assert names(await stream(client, chat, "Name a colour."))[-1] == "error"
    openai_fake.script.reply("Red.")
    events = await stream(client, chat, None, mode="regenerate")
    assert one(events, "message")["content"] == "Red."
    msgs = await messages(client, chat)
    assert [(m["role"], m["content"]) for m in msgs] == [
        ("user", "Name a colour."), ("assistant", "Red.")]


async def test_r8_3_swipe_and_continue_need_an_assistant_message_last(
    client: httpx.AsyncClient, openai_fake: FakeUpstream
) -> None:
    chat = await new_chat(client, await fake_connection(client, openai_fake))
    r = await generate(client, chat, None, mode="regenerate")
    assert r.status_code == 404, r.text  # nothing to regenerate in an empty chat
    assert r.json()["error"]["code"] == "not_found"
    r = await client.post(f"/v1/chats/{chat}/messages", json={"role": "user", "content": "hi"})
    assert r.status_code == 201, r.text
    for mode in ("swipe", "continue"):
        for streamed in (True, False):  # refused before any stream starts: a plain 422
            r = await generate(client, chat, None, mode=mode, stream=streamed)
            assert r.status_code == 422, (mode, streamed, r.text)
            err = r.json()["error"]
            assert err["code"] == "invalid_input" and "assistant message" in err["message"]
    assert openai_fake.generation_requests == []
    assert len(await messages(client, chat)) == 1


# SillyTavern's `continue_prefill` on and `continue_postfix` none: the old text is the
# prefill (the default, a nudge after the history, is tested below)
AS_PREFILL = {"params": {"continue_prefill": True, "continue_postfix": ""}}


@pytest.mark.parametrize("kind", ["openai-chat", "anthropic", "openai-text"])
async def test_r2_14_continue_stores_the_old_text_plus_the_continuation(
    client: httpx.AsyncClient, request: pytest.FixtureRequest, kind: str
) -> None:
    fake = _fake(request, kind)
    chat, first = await _chat_with_answer(client, fake, "Once upon a time",
                                          **(AS_PREFILL if kind != "openai-text" else {}))
    fake.script.reply(", a fox slept.")
    events = await stream(client, chat, None, mode="continue")
    saved = one(events, "message")
    assert saved["content"] == "Once upon a time, a fox slept."
    assert "".join(deltas(events)) == ", a fox slept."  # the client has the old text already
    if kind == "openai-text":
        prompt = fake.last_body["prompt"]
        assert prompt.endswith("<|im_start|>assistant\nOnce upon a time")  # no suffix, no line
        assert prompt.count("Once upon a time") == 1
    else:
        assert _last_turn(fake)["role"] == "assistant"
        assert _text(_last_turn(fake)) == "Once upon a time"
        assert json.dumps(fake.last_body["messages"]).count("Once upon a time") == 1
    msgs = await messages(client, chat)
    assert len(msgs) == 2 and msgs[1]["id"] == first["message_id"]
    assert msgs[1]["content"] == "Once upon a time, a fox slept."
    assert [v["content"] for v in msgs[1]["variants"]] == [
        "Once upon a time", "Once upon a time, a fox slept."]


@pytest.mark.parametrize("kind", ["openai-chat", "kobold"])
async def test_r8_3_impersonate_returns_text_and_stores_nothing(
    client: httpx.AsyncClient, request: pytest.FixtureRequest, kind: str
) -> None:
    fake = _fake(request, kind)
    chat, _ = await _chat_with_answer(client, fake, "Blue.")
    before = await messages(client, chat)
    fake.script.reply("I would pick purple.")
    r = await generate(client, chat, None, mode="impersonate", stream=False)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["content"] == "I would pick purple."
    assert body["message_id"] is None and body["variant_id"] is None
    assert await messages(client, chat) == before
    if kind == "kobold":  # text mode opens a user turn instead of the answer
        assert fake.last_body["prompt"].endswith("<|im_start|>user\n")


PREFILL = "Certainly,"


@pytest.mark.parametrize("kind", ["openai-chat", "anthropic", "openai-text", "kobold"])
async def test_r2_12_prefill_leads_the_first_delta_once_and_is_stored(
    client: httpx.AsyncClient, request: pytest.FixtureRequest, kind: str
) -> None:
    fake = _fake(request, kind)
    chat = await new_chat(client, await fake_connection(client, fake, prefill=PREFILL))
    fake.script.add(Reply(text=" the tide turns at noon."))
    events = await stream(client, chat, "When does the tide turn?")
    parts = deltas(events)
    assert parts[0].startswith(PREFILL) and parts[0] != PREFILL  # with the first real delta
    assert "".join(parts) == "Certainly, the tide turns at noon."
    assert "".join(parts).count(PREFILL) == 1
    assert one(events, "message")["content"] == "Certainly, the tide turns at noon."
    assert (await messages(client, chat))[-1]["content"] == "Certainly, the tide turns at noon."
    if kind in ("openai-text", "kobold"):
        prompt = fake.last_body["prompt"]
        # the generation line ends the prompt with the prefill (with wrap on and names off,
        # SillyTavern puts one separator after it)
        assert prompt.endswith("<|im_start|>user\nWhen does the tide turn?<|im_end|>\n"
                               "<|im_start|>assistant\nCertainly,\n")
        assert prompt.count(PREFILL) == 1
    else:
        assert _last_turn(fake)["role"] == "assistant" and _text(_last_turn(fake)) == PREFILL
        assert json.dumps(fake.last_body["messages"]).count(PREFILL) == 1


async def test_r2_12_request_prefill_overrides_the_connection_prefill(
    client: httpx.AsyncClient, openai_fake: FakeUpstream
) -> None:
    chat = await new_chat(client, await fake_connection(client, openai_fake, prefill=PREFILL))
    openai_fake.script.reply(" it is noon.")
    r = await generate(client, chat, "When?", stream=False, prefill="Aye,")
    assert r.status_code == 200, r.text
    assert r.json()["content"] == "Aye, it is noon."
    assert _last_turn(openai_fake) == {"role": "assistant", "content": "Aye,"}
    assert PREFILL not in json.dumps(openai_fake.last_body)


async def test_r2_12_prefill_is_sent_on_the_first_step_only(
    client: httpx.AsyncClient, openai_fake: FakeUpstream
) -> None:
    chat = await new_chat(client, await fake_connection(client, openai_fake, prefill=PREFILL))
    openai_fake.script.tool_call("list_dir", {}, id="call_1", text=" let me look.")
    openai_fake.script.reply("The workspace is empty.")
    events = await stream(client, chat, "What is there?")
    first, second = openai_fake.bodies()
    assert first["messages"][-1] == {"role": "assistant", "content": PREFILL}
    assert second["messages"][-1]["role"] == "tool"
    # the first step's text (prefill included) went back as the assistant turn with the call
    assert second["messages"][-2]["content"] == "Certainly, let me look."
    assert "".join(deltas(events)).count(PREFILL) == 1


async def test_r2_12_connection_prefill_starts_new_answers_only(
    client: httpx.AsyncClient, openai_fake: FakeUpstream
) -> None:
    chat, first = await _chat_with_answer(client, openai_fake, " once upon a time",
                                          prefill=PREFILL, **AS_PREFILL)
    assert first["content"] == "Certainly, once upon a time"
    # continue goes on right after the old text: the prefill is not put in its middle
    openai_fake.script.reply(", a fox slept.")
    events = await stream(client, chat, None, mode="continue")
    assert _last_turn(openai_fake) == {"role": "assistant",
                                       "content": "Certainly, once upon a time"}
    assert "".join(deltas(events)) == ", a fox slept."
    assert one(events, "message")["content"] == "Certainly, once upon a time, a fox slept."
    # impersonate writes the user's next message: no assistant prefill in front of it
    openai_fake.script.reply("I liked it.")
    r = await generate(client, chat, None, mode="impersonate", stream=False)
    assert r.status_code == 200, r.text
    assert r.json()["content"] == "I liked it."
    assert _last_turn(openai_fake)["role"] != "assistant"
    assert json.dumps(openai_fake.last_body["messages"]).count(PREFILL) == 1  # the history


async def test_r2_11_a_failure_before_any_token_stores_no_prefill_or_continue_copy(
    client: httpx.AsyncClient, openai_fake: FakeUpstream
) -> None:
    chat, first = await _chat_with_answer(client, openai_fake, "Once upon a time",
                                          prefill=PREFILL, params={"retries": 0})  # nudge
    openai_fake.script.error(500, "down")
    assert stream_error(await stream(client, chat, None, mode="continue"))
    openai_fake.script.error(500, "down")
    assert stream_error(await stream(client, chat, "Again?"))
    msgs = await messages(client, chat)
    # the continued message still shows its complete answer; the failed turn stored nothing
    assert [(m["role"], m["content"]) for m in msgs] == [
        ("user", "Name a colour."), ("assistant", "Certainly,Once upon a time"),
        ("user", "Again?")]
    assert msgs[1]["active_variant"] == first["variant_id"]
    assert [v["status"] for v in msgs[1]["variants"]] == ["complete"]


def stream_error(events: list) -> bool:
    return names(events)[-1] == "error" and one(events, "error")["code"] == "provider_http_error"


async def test_anthropic_prefill_is_sent_trimmed_and_stored_with_its_whitespace(
    client: httpx.AsyncClient, anthropic_fake: FakeUpstream
) -> None:
    _chat, first = await _chat_with_answer(client, anthropic_fake, " once upon a time",
                                          prefill="Certainly, ")
    # the API refuses trailing whitespace on the last assistant turn (SillyTavern trims it
    # too); the stored answer keeps the prefill as written
    assert _last_turn(anthropic_fake) == {"role": "assistant", "content": [
        {"type": "text", "text": "Certainly,"}]}
    assert first["content"] == "Certainly, once upon a time"


async def test_r2_14_a_continuation_opening_with_a_space_takes_the_postfix_place(
    client: httpx.AsyncClient, openai_fake: FakeUpstream
) -> None:
    chat, _ = await _chat_with_answer(client, openai_fake, "The story begins.")
    openai_fake.script.reply(" And then it goes on.")
    events = await stream(client, chat, None, mode="continue")
    assert one(events, "message")["content"] == "The story begins. And then it goes on."
    assert "".join(deltas(events)) == " And then it goes on."
    openai_fake.script.reply("Then it ends.")  # no space of its own: the postfix stays
    events = await stream(client, chat, None, mode="continue")
    assert one(events, "message")["content"] == \
        "The story begins. And then it goes on. Then it ends."
