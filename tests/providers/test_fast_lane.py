"""The fast lane (R2.11, R2.12): plain text deltas taken in the network read's callback reach
the consumer's tap in stream order with everything else, nothing after `[DONE]` is taken, a
chunk the lane cannot take whole goes the ordinary way, and the idle and total deadlines
still hold while the consumer's task never wakes."""

from __future__ import annotations

import asyncio
import gzip
import time

import orjson
import pytest

from evacore.errors import ProviderConnectionError, ProviderError, ProviderTimeout
from evacore.providers import Finish, TextDelta, make_provider
from evacore.providers.base import Connection, TextTap, Timeouts
from tests.fakes.server import Exchange, LoopbackServer
from tests.fakes.upstream import FakeUpstream
from tests.providers.helpers import chat_request


def _delta(text: str, model: str = "m1") -> str:
    chunk = {"id": "c", "model": model, "object": "chat.completion.chunk",
             "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
    return "data: " + orjson.dumps(chunk).decode() + "\n\n"


FINISH = ('data: {"model":"m2","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
          'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":7,'
          '"total_tokens":10}}\n\n')
SPLIT = _delta("split ")

# Each item is one network write, 30 ms after the one before.
WRITES = [
    _delta("A "),                                  # the first text: the consumer's own path
    _delta("B "),                                  # the tap's
    SPLIT[:20], SPLIT[20:],                        # an event cut in two: the ordinary path
    _delta("C1 ") + _delta("C2 "),                 # two events in one read: the tap's, both
    _delta("D ", model="m2"),                      # another model: the ordinary path
    _delta("E ", model="m2"),                      # the same model again: the tap's
    'data: {"choices":[{"index":0,"delta":{"content":"R ","reasoning_content":"hm"}}]}\n\n',
    FINISH,                                        # finish and usage: the ordinary path
    "data: [DONE]\n\n",
    _delta("X ", model="m2"),                      # after [DONE]: nobody's
]


def _server(writes: list[str], gap: float) -> LoopbackServer:
    async def handle(ex: Exchange) -> None:
        ex.start_stream()
        for data in writes:
            ex.write(data)
            await ex.sleep(gap)
        ex.end_stream()

    return LoopbackServer(handle)


def _connection(url: str, timeouts: Timeouts | None = None) -> Connection:
    return Connection(id="c1", name="lane", kind="openai-chat", base_url=url + "/v1",
                      model="m1", timeouts=timeouts or Timeouts(), retries=0)


async def _consume(provider, tap: TextTap, seen: list[tuple[str, str]],
                   refuse: bool = False, one: bool = False) -> list[object]:
    """Read the stream, opening the tap after the first text (as stage 12 does); with `one`,
    its one-text door too (what it takes is seen as "one")."""

    def take(texts: list[str]) -> bool:
        if refuse:
            return False
        seen.extend(("tap", t) for t in texts)
        return True

    def take_text(text: str) -> bool:
        if refuse:
            return False
        seen.append(("one", text))
        return True

    events: list[object] = []
    async for event in provider.stream(chat_request(), tap=tap):
        events.append(event)
        if isinstance(event, TextDelta):
            seen.append(("event", event.text))
            tap.take = take
            if one:
                tap.take_text = take_text
    return events


async def test_the_tap_takes_plain_deltas_in_stream_order_and_nothing_after_done() -> None:
    with _server(WRITES, 0.03) as server:
        provider = make_provider(_connection(server.url))
        tap = TextTap()
        seen: list[tuple[str, str]] = []
        events = await _consume(provider, tap, seen)
        await provider.aclose()
    assert seen == [("event", "A "), ("tap", "B "), ("event", "split "), ("tap", "C1 "),
                    ("tap", "C2 "), ("event", "D "), ("tap", "E "), ("event", "R ")]
    end = events[-1]
    assert isinstance(end, Finish) and end.finish_reason == "stop" and end.model == "m2"
    assert end.usage is not None and end.usage.total_tokens == 10


async def test_a_chunk_of_one_text_goes_to_take_text_and_a_chunk_of_several_to_take() -> None:
    """The consumer's one-text door (`take_text`) gets each read that brings one plain
    text, with no list made; a read of several texts still goes to `take`; order holds."""
    with _server(WRITES, 0.03) as server:
        provider = make_provider(_connection(server.url))
        seen: list[tuple[str, str]] = []
        await _consume(provider, TextTap(), seen, one=True)
        await provider.aclose()
    assert seen == [("event", "A "), ("one", "B "), ("event", "split "), ("tap", "C1 "),
                    ("tap", "C2 "), ("event", "D "), ("one", "E "), ("event", "R ")]


async def test_crlf_line_ends_take_the_fast_lane_too() -> None:
    writes = [w.replace("\n", "\r\n") for w in WRITES]
    with _server(writes, 0.03) as server:
        provider = make_provider(_connection(server.url))
        seen: list[tuple[str, str]] = []
        await _consume(provider, TextTap(), seen)
        await provider.aclose()
    assert seen == [("event", "A "), ("tap", "B "), ("event", "split "), ("tap", "C1 "),
                    ("tap", "C2 "), ("event", "D "), ("tap", "E "), ("event", "R ")]


@pytest.mark.parametrize("one", [False, True], ids=["take", "take_text"])
async def test_a_refusing_tap_loses_nothing(one: bool) -> None:
    with _server(WRITES, 0.02) as server:
        provider = make_provider(_connection(server.url))
        seen: list[tuple[str, str]] = []
        await _consume(provider, TextTap(), seen, refuse=True, one=one)
        await provider.aclose()
    assert "".join(t for _, t in seen) == "A B split C1 C2 D E R "
    assert {kind for kind, _ in seen} == {"event"}


async def test_stop_strings_keep_every_text_on_the_ordinary_path() -> None:
    with _server(WRITES, 0.02) as server:
        provider = make_provider(_connection(server.url))
        tap = TextTap()
        seen: list[str] = []
        tap.take = lambda texts: bool(seen.extend(texts)) or True
        texts = [e.text async for e in provider.stream(chat_request(stop=["E "]), tap=tap)
                 if isinstance(e, TextDelta)]
        await provider.aclose()
    assert seen == [] and "".join(texts) == "A B split C1 C2 D "


async def test_the_idle_deadline_moves_with_each_taken_token_and_still_fires(
    openai_fake: FakeUpstream,
) -> None:
    # 20 tokens 50 ms apart take a second, past the 0.3 s idle deadline: no timeout.
    openai_fake.script.reply("w " * 20, token_delay=0.05, model="m1")
    # then a stream that stops after 6 tokens: the idle deadline fires in the tap's time too
    openai_fake.script.reply("v " * 20, token_delay=0.05, hang_after=6, model="m1")
    timeouts = Timeouts(connect=2, first_token=2, idle=0.3, total=30)
    provider = make_provider(openai_fake.connection(timeouts=timeouts))
    seen: list[tuple[str, str]] = []
    await _consume(provider, TextTap(), seen)
    assert "".join(t for _, t in seen) == "w " * 20
    assert sum(kind == "tap" for kind, _ in seen) >= 15

    seen.clear()
    started = time.monotonic()
    with pytest.raises(ProviderTimeout) as caught:
        await _consume(provider, TextTap(), seen)
    assert caught.value.details["which"] == "idle"
    assert "".join(t for _, t in seen) == "v " * 6
    assert time.monotonic() - started < 2.0
    await provider.aclose()


@pytest.mark.latency
async def test_the_total_deadline_holds_while_the_tap_takes_every_token(
    openai_fake: FakeUpstream,
) -> None:
    openai_fake.script.reply("t " * 200, token_delay=0.02, model="m1")
    timeouts = Timeouts(connect=2, first_token=2, idle=2, total=0.5)
    provider = make_provider(openai_fake.connection(timeouts=timeouts))
    seen: list[tuple[str, str]] = []
    started = time.monotonic()
    with pytest.raises(ProviderTimeout) as caught:
        await _consume(provider, TextTap(), seen)
    assert caught.value.details["which"] == "total"
    assert time.monotonic() - started < 1.5
    assert 5 < len(seen) < 200
    await provider.aclose()


@pytest.mark.latency
async def test_cancel_while_the_tap_takes_closes_the_upstream_at_once(
    openai_fake: FakeUpstream,
) -> None:
    openai_fake.script.reply("t " * 500, token_delay=0.01, model="m1")
    provider = make_provider(openai_fake.connection())
    seen: list[tuple[str, str]] = []
    task = asyncio.create_task(_consume(provider, TextTap(), seen))
    while sum(kind == "tap" for kind, _ in seen) < 10:
        await asyncio.sleep(0.01)
    task.cancel()
    started = time.monotonic()
    assert await openai_fake.await_client_left(1.0)
    assert time.monotonic() - started < 0.1
    with pytest.raises(asyncio.CancelledError):
        await task
    count = len(seen)
    await asyncio.sleep(0.1)
    assert len(seen) == count  # nothing is taken once the reader is gone
    await provider.aclose()


def _with_head(status: int, first: bytes, rest: list[bytes], headers: dict[str, str] | None = None,
               reset: bool = False) -> LoopbackServer:
    """The head and the body's first chunk in one network write, then the rest 20 ms apart
    (and then a reset of the connection, with `reset`)."""

    async def handle(ex: Exchange) -> None:
        ex.start_stream(status, headers=headers, first=first)
        for data in rest:
            await ex.sleep(0.02)
            ex.write(data)
        if reset:
            await ex.sleep(0.02)
            ex.reset()
            return
        ex.end_stream()

    return LoopbackServer(handle)


async def _tapped_from_the_start(provider, seen: list[tuple[str, str]]) -> list[object]:
    """Read the stream with the tap open before the request goes out (as stage 12 opens it
    when nothing goes in front of the first text)."""
    tap = TextTap()
    tap.take = lambda texts: not seen.extend(("tap", t) for t in texts)
    tap.take_text = lambda text: not seen.append(("one", text))
    events: list[object] = []
    async for event in provider.stream(chat_request(), tap=tap):
        events.append(event)
        if isinstance(event, TextDelta):
            seen.append(("event", event.text))
    return events


async def test_a_first_text_that_comes_with_the_head_is_taken_in_that_read() -> None:
    """The head and the first text in one read: the tap takes the text in that read, before
    the consumer's task wakes for the head; the rest of the stream follows in order."""
    rest = [_delta("B ").encode(), FINISH.encode(), b"data: [DONE]\n\n"]
    with _with_head(200, _delta("A ").encode(), rest) as server:
        provider = make_provider(_connection(server.url))
        seen: list[tuple[str, str]] = []
        events = await _tapped_from_the_start(provider, seen)
        await provider.aclose()
    assert seen == [("one", "A "), ("one", "B ")]
    assert isinstance(events[-1], Finish) and events[-1].finish_reason == "stop"


@pytest.mark.parametrize(("status", "headers"), [
    (500, None), (200, {"Content-Encoding": "gzip"})], ids=["error status", "gzip"])
async def test_a_body_that_comes_with_the_head_is_not_taken_when_the_head_says_otherwise(
    status: int, headers: dict[str, str] | None,
) -> None:
    """An error's body (read whole for its message) and an encoded body (inflated first)
    are never offered to the tap with the head: the text of the one is not the answer's,
    the bytes of the other are not text."""
    first = _delta("A ").encode()
    if headers:  # the whole body, one gzip stream
        first = gzip.compress(first + FINISH.encode() + b"data: [DONE]\n\n")
    with _with_head(status, first, [], headers) as server:
        provider = make_provider(_connection(server.url))
        seen: list[tuple[str, str]] = []
        if status >= 400:
            with pytest.raises(ProviderError):
                await _tapped_from_the_start(provider, seen)
        else:
            await _tapped_from_the_start(provider, seen)
        await provider.aclose()
    assert seen == ([] if status >= 400 else [("event", "A ")])


async def test_a_stream_that_breaks_after_a_text_taken_with_the_head_is_not_retried() -> None:
    """Retries only before the first token: a text the tap took with the head counts as
    one, so the connection's break after it fails the answer instead of asking again."""
    with _with_head(200, _delta("A ").encode(), [_delta("B ").encode()], reset=True) as server:
        provider = make_provider(Connection(
            id="c1", name="lane", kind="openai-chat", base_url=server.url + "/v1",
            model="m1", timeouts=Timeouts(), retries=2))
        seen: list[tuple[str, str]] = []
        with pytest.raises(ProviderConnectionError) as caught:
            await _tapped_from_the_start(provider, seen)
        await provider.aclose()
    assert seen == [("one", "A "), ("one", "B ")]
    assert caught.value.retryable is False
    assert len(server.requests) == 1
