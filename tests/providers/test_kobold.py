"""kobold over loopback against the fake KoboldCpp API (R2.10, R2.11)."""

from __future__ import annotations

import asyncio

import httpx

from evacore.providers import TextDelta, make_provider
from evacore.providers.kobold import build_request_body
from tests.fakes.script import Reply
from tests.fakes.upstream import FakeUpstream
from tests.providers.helpers import deltas, events_of, finish, text_request


async def wait_for(predicate, timeout: float = 5.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.005)
    return True


def test_r2_10_kobold_body_fields() -> None:
    conn = FakeUpstream("kobold").connection(context_size=4096, params={
        "temperature": 0.8, "repetition_penalty": 1.1, "typical_p": 0.9, "min_p": 0.05,
        "frequency_penalty": 0.3, "stream_options": {}, "script": []})
    body = build_request_body(conn, text_request(stop=["\nUser:"], max_tokens=200),
                              stream=True, genkey="KCPP1234")
    assert body == {"prompt": "<|user|>Hello!<|assistant|>", "max_length": 200,
                    "max_context_length": 4096, "trim_stop": True, "stop_sequence": ["\nUser:"],
                    "genkey": "KCPP1234", "rep_pen": 1.1, "typical": 0.9, "min_p": 0.05,
                    "temperature": 0.8}


async def test_r2_10_kobold_streams_tokens(
    kobold_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    kobold_fake.script.reply("Once upon a time", finish_reason="length")
    provider = make_provider(kobold_fake.connection(), client=http_client)
    events = await events_of(provider, text_request())
    assert deltas(events) == ["Once ", "upon ", "a ", "time"]
    end = finish(events)
    assert (end.finish_reason, end.usage) == ("length", None)
    request = kobold_fake.generation_requests[-1]
    assert request.path == "/api/extra/generate/stream"
    assert request.json["genkey"].startswith("KCPP")
    assert kobold_fake.aborted_genkeys == []  # a finished generation is not aborted


async def test_r2_10_kobold_complete(
    kobold_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    kobold_fake.script.reply("The end.")
    provider = make_provider(kobold_fake.connection(), client=http_client)
    answer = await provider.complete(text_request())
    assert (answer.text, answer.finish_reason, answer.usage) == ("The end.", "stop", None)
    assert kobold_fake.generation_requests[-1].path == "/api/v1/generate"


async def test_r2_11_kobold_cancel_aborts_the_generation_by_genkey(
    kobold_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    kobold_fake.script.add(Reply(text="word " * 200, token_delay=0.02))
    provider = make_provider(kobold_fake.connection(), client=http_client)
    first = asyncio.Event()

    async def consume() -> None:
        async for event in provider.stream(text_request()):
            if isinstance(event, TextDelta):
                first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first.wait(), 2)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert await kobold_fake.await_client_left(0.5)
    genkey = kobold_fake.generation_requests[0].json["genkey"]
    assert await wait_for(lambda: kobold_fake.aborted_genkeys == [genkey])
    await provider.aclose()


async def test_r2_11_kobold_stop_string_aborts_upstream(
    kobold_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    kobold_fake.script.add(Reply(chunks=["Yes.", "\nUser:", " go on"] + ["x"] * 50,
                                 token_delay=0.01))
    provider = make_provider(kobold_fake.connection(), client=http_client)
    events = await events_of(provider, text_request(stop=["\nUser:"]))
    assert deltas(events) == ["Yes."]
    assert await wait_for(lambda: len(kobold_fake.aborted_genkeys) == 1)


async def test_r2_6_kobold_tokencount(
    kobold_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    provider = make_provider(kobold_fake.connection(), client=http_client)
    assert await provider.count_tokens("Hi, Eva") == 3
    assert kobold_fake.bodies("/api/extra/tokencount") == [{"prompt": "Hi, Eva"}]


async def test_r2_10_kobold_base_url_forms(
    kobold_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    for base in (kobold_fake.url, kobold_fake.url + "/api", kobold_fake.url + "/api/v1/"):
        provider = make_provider(kobold_fake.connection(base_url=base), client=http_client)
        assert provider.wire_request(text_request(), stream=False).url == (
            kobold_fake.url + "/api/v1/generate")


async def test_r2_11_kobold_cancelled_complete_aborts_too(
    kobold_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    kobold_fake.script.reply("slow", first_token_delay=5)
    provider = make_provider(kobold_fake.connection(), client=http_client)
    task = asyncio.create_task(provider.complete(text_request()))
    assert await wait_for(lambda: bool(kobold_fake.generation_requests))
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    genkey = kobold_fake.generation_requests[0].json["genkey"]
    assert await wait_for(lambda: kobold_fake.aborted_genkeys == [genkey])
    assert await kobold_fake.await_client_left(0.5)
