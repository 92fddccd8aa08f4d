"""openai-text over loopback against the fake /v1/completions (R2.10, text mode)."""

from __future__ import annotations

import httpx
import pytest

from evacore.errors import InvalidInput
from evacore.providers import make_provider
from evacore.providers.openai_text import build_request_body
from tests.fakes.upstream import FakeUpstream
from tests.providers.helpers import chat_request, deltas, events_of, finish, text_request


async def test_r2_10_openai_text_streams_the_completion(
    openai_text_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    openai_text_fake.script.reply("Good evening.", finish_reason="length")
    provider = make_provider(openai_text_fake.connection(), client=http_client)
    events = await events_of(provider, text_request(stop=["<|user|>"]))
    assert deltas(events) == ["Good ", "evening."]
    end = finish(events)
    assert end.finish_reason == "length" and end.usage is not None
    sent = openai_text_fake.last_body
    assert sent["prompt"] == "<|user|>Hello!<|assistant|>"
    assert sent["stop"] == ["<|user|>"]
    assert openai_text_fake.generation_requests[-1].path == "/v1/completions"


async def test_r2_10_openai_text_complete(
    openai_text_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    openai_text_fake.script.reply("All good.")
    provider = make_provider(openai_text_fake.connection(), client=http_client)
    answer = await provider.complete(text_request())
    assert (answer.text, answer.finish_reason) == ("All good.", "stop")
    assert answer.usage is not None and answer.model == "fake-model"


def test_r2_10_openai_text_body_has_only_known_fields() -> None:
    conn = FakeUpstream("openai-text").connection(params={
        "temperature": 1.0, "min_p": 0.05, "rep_pen": 1.2, "tool_choice": "auto",
        "stream_usage": False})
    # the prefill is already in the prompt (stage 9); the adapter never adds it again
    body = build_request_body(conn, text_request(prompt="...Eva: Well,", prefill="Well,",
                                                 max_tokens=64), stream=True)
    assert body == {"model": "fake-model", "prompt": "...Eva: Well,", "stream": True,
                    "max_tokens": 64, "temperature": 1.0, "min_p": 0.05}


def test_r2_10_text_adapters_need_a_prompt() -> None:
    conn = FakeUpstream("openai-text").connection()
    with pytest.raises(InvalidInput):
        build_request_body(conn, chat_request(), stream=True)
