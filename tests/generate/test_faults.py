"""R2.11, §13: upstream faults through the generate API — HTTP 500/429 retried before the first
token only, a reset or malformed stream mid-answer, a first token that never comes. The client
gets a typed `error` event (or HTTP 502), the user's message stays, a partial answer is kept as
a `failed` variant."""

from __future__ import annotations

import httpx
import pytest

from tests.fakes.script import Reply
from tests.fakes.upstream import FakeUpstream
from tests.generate.helpers import (
    FAST_TIMEOUTS,
    deltas,
    fake_connection,
    generate,
    messages,
    names,
    new_chat,
    one,
    stream,
    tour_of,
    variant,
)

ANSWER = "Seven gulls sat on the harbour wall."


def assert_error_ends_stream(events: list, code: str) -> dict:
    """The stream's last event is `error` with a code and a message; no `done` or `message`."""
    assert names(events)[-1] == "error", events
    assert "done" not in names(events) and "message" not in names(events)
    err = events[-1][1]
    assert set(err) == {"code", "message"} and err["code"] == code and err["message"]
    return err


async def _assert_failed_partial(client: httpx.AsyncClient, chat: str, tour_id: str,
                                 partial: str) -> None:
    msgs = await messages(client, chat)
    assert [m["role"] for m in msgs] == ["user", "assistant"]
    assert msgs[0]["content"] == "Tell me about the gulls."
    v = variant(msgs[1])
    assert v["status"] == "failed" and v["content"] == partial
    assert v["finish_reason"] == "error"
    tour = await tour_of(client, tour_id)
    assert tour["status"] == "failed" and tour["variant_id"] == v["id"]


@pytest.mark.parametrize("kind,status", [("openai-chat", 500), ("anthropic", 429),
                                         ("kobold", 503)])
async def test_r2_11_http_errors_before_the_first_token_are_retried(
    client: httpx.AsyncClient, request: pytest.FixtureRequest, kind: str, status: int
) -> None:
    fake: FakeUpstream = request.getfixturevalue(
        {"openai-chat": "openai_fake", "anthropic": "anthropic_fake",
         "kobold": "kobold_fake"}[kind])
    chat = await new_chat(client, await fake_connection(client, fake))
    fake.script.error(status, "busy right now", retry_after_ms=0)
    fake.script.reply(ANSWER)
    events = await stream(client, chat, "Tell me about the gulls.")
    assert "".join(deltas(events)) == ANSWER and names(events)[-1] == "done"
    assert len(fake.generation_requests) == 2  # one failure, one retry
    assert (await messages(client, chat))[-1]["content"] == ANSWER


async def test_r2_11_retries_give_up_with_a_typed_error_and_keep_the_user_message(
    client: httpx.AsyncClient, openai_fake: FakeUpstream
) -> None:
    chat = await new_chat(client, await fake_connection(
        client, openai_fake, params={"retries": 1, "timeouts": FAST_TIMEOUTS}))
    openai_fake.script.error(500, "the GPU caught fire", times=2)
    events = await stream(client, chat, "Tell me about the gulls.")
    err = assert_error_ends_stream(events, "provider_http_error")
    assert "500" in err["message"] and "the GPU caught fire" in err["message"]
    assert len(openai_fake.generation_requests) == 2  # the first try and one retry
    msgs = await messages(client, chat)
    assert [m["role"] for m in msgs] == ["user"]  # nothing came: no answer is stored
    tour = await tour_of(client, one(events, "tour")["tour_id"])
    assert tour["status"] == "failed" and tour["error"]["code"] == "provider_http_error"


async def test_r2_11_non_stream_provider_failure_is_http_502(
    client: httpx.AsyncClient, anthropic_fake: FakeUpstream
) -> None:
    chat = await new_chat(client, await fake_connection(
        client, anthropic_fake, params={"retries": 0, "timeouts": FAST_TIMEOUTS}))
    anthropic_fake.script.error(500, "upstream exploded")
    r = await generate(client, chat, "Tell me about the gulls.", stream=False)
    assert r.status_code == 502, r.text
    err = r.json()["error"]
    assert err["code"] == "provider_http_error" and "upstream exploded" in err["message"]
    assert [m["role"] for m in await messages(client, chat)] == ["user"]


@pytest.mark.parametrize("kind", ["openai-chat", "kobold"])
async def test_r2_11_connection_reset_mid_stream_is_not_retried_and_keeps_the_partial(
    client: httpx.AsyncClient, request: pytest.FixtureRequest, kind: str
) -> None:
    fake: FakeUpstream = request.getfixturevalue(
        "openai_fake" if kind == "openai-chat" else "kobold_fake")
    chat = await new_chat(client, await fake_connection(client, fake))
    fake.script.add(Reply(text=ANSWER, reset_after=3))
    fake.script.reply("never asked for")
    events = await stream(client, chat, "Tell me about the gulls.")
    assert "".join(deltas(events)) == "Seven gulls sat "
    assert_error_ends_stream(events, "provider_connection_error")
    assert len(fake.generation_requests) == 1  # a token had arrived: no retry
    await _assert_failed_partial(client, chat, one(events, "tour")["tour_id"],
                                 "Seven gulls sat ")


@pytest.mark.parametrize("kind", ["anthropic", "openai-text"])
async def test_r2_11_malformed_sse_line_fails_the_tour_and_keeps_the_partial(
    client: httpx.AsyncClient, request: pytest.FixtureRequest, kind: str
) -> None:
    fake: FakeUpstream = request.getfixturevalue(
        "anthropic_fake" if kind == "anthropic" else "openai_text_fake")
    chat = await new_chat(client, await fake_connection(client, fake))
    fake.script.add(Reply(text=ANSWER, malformed_after=2))
    events = await stream(client, chat, "Tell me about the gulls.")
    assert "".join(deltas(events)) == "Seven gulls "
    assert_error_ends_stream(events, "provider_protocol_error")
    assert len(fake.generation_requests) == 1
    await _assert_failed_partial(client, chat, one(events, "tour")["tour_id"], "Seven gulls ")


async def test_r2_11_in_stream_error_event_after_tokens_is_not_retried(
    client: httpx.AsyncClient, anthropic_fake: FakeUpstream
) -> None:
    chat = await new_chat(client, await fake_connection(client, anthropic_fake))
    anthropic_fake.script.add(Reply(text=ANSWER, error_event_after=1,
                                    error_message="Overloaded"))
    events = await stream(client, chat, "Tell me about the gulls.")
    err = events[-1][1]
    assert names(events)[-1] == "error" and "Overloaded" in err["message"]
    assert len(anthropic_fake.generation_requests) == 1
    await _assert_failed_partial(client, chat, one(events, "tour")["tour_id"], "Seven ")


async def test_r2_11_slow_first_token_hits_the_first_token_timeout(
    client: httpx.AsyncClient, openai_fake: FakeUpstream
) -> None:
    timeouts = {**FAST_TIMEOUTS, "first_token": 0.3}
    chat = await new_chat(client, await fake_connection(
        client, openai_fake, params={"timeouts": timeouts}))
    for streamed in (True, False):
        openai_fake.script.add(Reply(text=ANSWER, hang_after=0))
        openai_fake.client_left.clear()
        if streamed:
            events = await stream(client, chat, "Tell me about the gulls.")
            err = assert_error_ends_stream(events, "provider_timeout")
            tour_id = one(events, "tour")["tour_id"]
        else:
            r = await generate(client, chat, "Tell me about the gulls.", stream=False)
            assert r.status_code == 502, r.text  # every provider failure is a 502 (§13)
            err = r.json()["error"]
            assert err["code"] == "provider_timeout"
            tour_id = err["tour_id"]
        assert "first token" in err["message"] and "0.3s" in err["message"]
        tour = await tour_of(client, tour_id)
        assert tour["status"] == "failed" and tour["error"]["code"] == "provider_timeout"
        # the wait upstream was the 0.3 s deadline, not the 5 s idle or 20 s total one
        assert 300 <= tour["diagnostics"]["timings"]["streaming"] < 4000
        assert openai_fake.wait_client_left(2.0)  # the hanging upstream request was closed
    assert len(openai_fake.generation_requests) == 2  # a timeout after sending: no retry
    assert [m["role"] for m in await messages(client, chat)] == ["user", "user"]


async def test_r2_11_a_crash_before_the_tour_started_is_a_500_error_body(
    client: httpx.AsyncClient, openai_fake: FakeUpstream, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from evacore.pipeline.stages.user_input import UserInput

    chat = await new_chat(client, await fake_connection(client, openai_fake))

    async def broken(self: UserInput, core: object, tour: object) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(UserInput, "run", broken)
    for streamed in (True, False):
        r = await generate(client, chat, "Hello?", stream=streamed)
        assert r.status_code == 500, r.text
        err = r.json()["error"]
        assert err["code"] == "internal" and "RuntimeError" in err["message"]
    assert openai_fake.generation_requests == []
