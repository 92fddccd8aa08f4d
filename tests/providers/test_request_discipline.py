"""Stage 11 (R2.11): timeouts, retries only before the first token, error mapping without
the API key, and the upstream closed at once when the consumer goes away."""

from __future__ import annotations

import asyncio
import socket
import time

import httpx
import pytest

from evacore.errors import (
    ProviderConnectionError,
    ProviderHTTPError,
    ProviderProtocolError,
    ProviderTimeout,
)
from evacore.providers import ProviderRequest, TextDelta, Timeouts, make_provider
from tests.fakes.upstream import FAKE_API_KEY, FakeUpstream
from tests.providers.helpers import chat_request, events_of, text_of, text_request

FAST = Timeouts(connect=1, first_token=0.3, idle=0.3, total=5)


def _request_for(kind: str) -> ProviderRequest:
    return chat_request() if kind in ("openai-chat", "anthropic") else text_request()


async def test_r2_11_http_500_retried_before_first_token(
    openai_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    openai_fake.script.error(500, "boom", times=2).reply("Third time lucky.")
    provider = make_provider(openai_fake.connection(), client=http_client)
    assert text_of(await events_of(provider, chat_request())) == "Third time lucky."
    assert len(openai_fake.generation_requests) == 3


async def test_r2_11_retries_run_out_with_the_upstream_message(
    openai_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    openai_fake.script.error(503, "model is loading", times=5)
    provider = make_provider(openai_fake.connection(retries=1), client=http_client)
    with pytest.raises(ProviderHTTPError) as caught:
        await events_of(provider, chat_request())
    assert caught.value.details["upstream_status"] == 503
    assert "model is loading" in caught.value.message
    assert caught.value.retryable
    assert len(openai_fake.generation_requests) == 2  # 1 + 1 retry


async def test_r2_11_non_stream_complete_retries_too(
    openai_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    openai_fake.script.error(502, "bad gateway").reply("ok")
    provider = make_provider(openai_fake.connection(), client=http_client)
    assert (await provider.complete(chat_request())).text == "ok"
    assert len(openai_fake.generation_requests) == 2


async def test_r2_11_429_honours_retry_after(
    openai_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    openai_fake.script.error(429, "rate limited", retry_after_ms=300).reply("ok")
    provider = make_provider(openai_fake.connection(), client=http_client)
    start = time.monotonic()
    assert text_of(await events_of(provider, chat_request())) == "ok"
    assert time.monotonic() - start >= 0.3
    first, second = openai_fake.generation_requests
    assert second.at - first.at >= 0.3


async def test_r2_11_retry_after_is_capped(
    openai_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    openai_fake.script.error(429, "come back in an hour", retry_after="3600").reply("ok")
    provider = make_provider(openai_fake.connection(retry_after_cap=0.1), client=http_client)
    start = time.monotonic()
    assert text_of(await events_of(provider, chat_request())) == "ok"
    assert time.monotonic() - start < 1.5


async def test_r2_11_client_errors_fail_at_once_without_the_key(
    openai_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    openai_fake.script.error(401, f"Incorrect API key provided: {FAKE_API_KEY}", times=3)
    provider = make_provider(openai_fake.connection(), client=http_client)
    with pytest.raises(ProviderHTTPError) as caught:
        await events_of(provider, chat_request())
    err = caught.value
    assert err.details["upstream_status"] == 401 and not err.retryable
    assert "Incorrect API key provided" in err.message
    assert FAKE_API_KEY not in str(err) and FAKE_API_KEY not in repr(err.to_dict())
    assert len(openai_fake.generation_requests) == 1
    assert FAKE_API_KEY not in repr(openai_fake.connection())


async def test_r2_11_reset_mid_stream_is_a_connection_error_without_retry(
    openai_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    openai_fake.script.reply("one two three four", reset_after=2)
    provider = make_provider(openai_fake.connection(), client=http_client)
    got: list[str] = []
    with pytest.raises(ProviderConnectionError):
        async for event in provider.stream(chat_request()):
            if isinstance(event, TextDelta):
                got.append(event.text)
    assert got == ["one ", "two "]
    assert len(openai_fake.generation_requests) == 1


async def test_r2_11_reset_before_first_token_is_retried(
    openai_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    openai_fake.script.reply("lost", reset_after=0).reply("Back again.")
    provider = make_provider(openai_fake.connection(), client=http_client)
    assert text_of(await events_of(provider, chat_request())) == "Back again."
    assert len(openai_fake.generation_requests) == 2


@pytest.mark.parametrize("kind", ["openai-chat", "anthropic", "kobold"])
async def test_r2_11_malformed_sse_line_is_a_protocol_error(
    kind: str, http_client: httpx.AsyncClient
) -> None:
    with FakeUpstream(kind) as fake:
        fake.script.reply("fine until now", malformed_after=1)
        provider = make_provider(fake.connection(), client=http_client)
        with pytest.raises(ProviderProtocolError):
            await events_of(provider, _request_for(kind))
        assert len(fake.generation_requests) == 1


@pytest.mark.latency
async def test_r2_11_slow_first_token_times_out(
    openai_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    openai_fake.script.reply("too late", hang_after=0)
    provider = make_provider(openai_fake.connection(timeouts=FAST), client=http_client)
    start = time.monotonic()
    with pytest.raises(ProviderTimeout) as caught:
        await events_of(provider, chat_request())
    assert caught.value.details["which"] == "first_token"
    assert 0.25 <= time.monotonic() - start < 1.0
    assert len(openai_fake.generation_requests) == 1  # a timeout is not retried
    assert await openai_fake.await_client_left(0.5)


async def test_r2_11_no_headers_at_all_is_a_first_token_timeout(
    anthropic_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    anthropic_fake.script.reply("never", hang_before_headers=True)
    provider = make_provider(anthropic_fake.connection(timeouts=FAST), client=http_client)
    with pytest.raises(ProviderTimeout) as caught:
        await events_of(provider, chat_request())
    assert caught.value.details["which"] == "first_token"


async def test_r2_11_idle_timeout_between_chunks(
    openai_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    openai_fake.script.reply("a b c d", hang_after=2)
    provider = make_provider(openai_fake.connection(timeouts=FAST), client=http_client)
    got: list[str] = []
    with pytest.raises(ProviderTimeout) as caught:
        async for event in provider.stream(chat_request()):
            if isinstance(event, TextDelta):
                got.append(event.text)
    assert caught.value.details["which"] == "idle"
    assert got == ["a ", "b "]


async def test_r2_11_total_timeout(
    openai_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    openai_fake.script.reply("word " * 40, token_delay=0.05)
    timeouts = Timeouts(connect=1, first_token=1, idle=1, total=0.4)
    provider = make_provider(openai_fake.connection(timeouts=timeouts), client=http_client)
    with pytest.raises(ProviderTimeout) as caught:
        await events_of(provider, chat_request())
    assert caught.value.details["which"] == "total"


async def test_r2_11_non_stream_total_timeout(
    openai_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    openai_fake.script.reply("slow", first_token_delay=2)
    timeouts = Timeouts(connect=1, first_token=5, idle=5, total=0.3)
    provider = make_provider(openai_fake.connection(timeouts=timeouts), client=http_client)
    with pytest.raises(ProviderTimeout) as caught:
        await provider.complete(chat_request())
    assert caught.value.details["which"] == "total"


async def test_r2_11_refused_connection_retries_then_fails(http_client: httpx.AsyncClient) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    conn = FakeUpstream().connection(base_url=f"http://127.0.0.1:{port}/v1")
    provider = make_provider(conn, client=http_client)
    with pytest.raises(ProviderConnectionError) as caught:
        await events_of(provider, chat_request())
    assert FAKE_API_KEY not in caught.value.message


@pytest.mark.parametrize("kind", ["openai-chat", "openai-text", "anthropic", "kobold"])
@pytest.mark.latency
async def test_r2_11_cancel_closes_upstream_within_100ms(
    kind: str, http_client: httpx.AsyncClient
) -> None:
    with FakeUpstream(kind) as fake:
        fake.script.reply("word " * 200, token_delay=0.02)
        provider = make_provider(fake.connection(), client=http_client)
        first = asyncio.Event()

        async def consume() -> None:
            async for event in provider.stream(_request_for(kind)):
                if isinstance(event, TextDelta):
                    first.set()

        task = asyncio.create_task(consume())
        await asyncio.wait_for(first.wait(), 2)
        cancelled_at = time.monotonic()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert await fake.await_client_left(0.5)
        assert fake.disconnect_times[0] - cancelled_at < 0.1
        assert len(fake.generation_requests) == 1


@pytest.mark.latency
async def test_r2_11_cancel_while_waiting_for_first_token_closes_upstream(
    openai_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    openai_fake.script.reply("never", hang_after=0)
    provider = make_provider(openai_fake.connection(), client=http_client)
    task = asyncio.create_task(events_of(provider, chat_request()))
    for _ in range(200):  # until the upstream holds the request
        if openai_fake.generation_requests:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.02)
    cancelled_at = time.monotonic()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert await openai_fake.await_client_left(0.5)
    assert openai_fake.disconnect_times[0] - cancelled_at < 0.1


async def test_r2_11_breaking_out_of_the_stream_closes_upstream(
    openai_fake: FakeUpstream, http_client: httpx.AsyncClient
) -> None:
    openai_fake.script.reply("word " * 200, token_delay=0.02)
    provider = make_provider(openai_fake.connection(), client=http_client)
    stream = provider.stream(chat_request())
    async for _ in stream:
        break
    await stream.aclose()  # type: ignore[attr-defined]
    assert await openai_fake.await_client_left(0.1)
