"""The fast lane's template parse (`_chunk_template.py`): once a stream's text chunk has
passed the whole parse, chunks shaped the same are read from their text alone, and every
chunk reads exactly as the whole parse reads it, whatever its text or shape."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from evacore.providers import _openai_wire as wire
from evacore.providers._chunk_template import LEARN_TRIES, Template, templated
from evacore.providers._fast_lane import FastLane
from evacore.providers._transport import Deadlines
from evacore.providers.base import Timeouts


def _lane(model: str | None = "m1") -> FastLane:
    lane = FastLane(tap=None, fast_text=wire.fast_chat_text, clock=Deadlines(Timeouts()))  # type: ignore[arg-type]
    lane.model = model
    return lane


def _chunk(text: Any, *, model: str = "m1", cid: str = "chatcmpl-1", **delta: Any) -> str:
    return orjson.dumps({
        "id": cid, "object": "chat.completion.chunk", "created": 1700000000, "model": model,
        "choices": [{"index": 0, "delta": {"content": text, **delta}, "logprobs": None,
                     "finish_reason": None}]}).decode()


class _Counting:
    """The whole parse, counted."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, data: str, lane: FastLane) -> str | None:
        self.calls += 1
        return wire._chat_text(data, lane)


def test_after_one_whole_parse_the_stream_is_read_from_its_text() -> None:
    whole = _Counting()
    parse, lane = templated(whole), _lane()
    assert parse(_chunk("Hello"), lane) == "Hello"
    learned = whole.calls
    assert isinstance(lane.state, Template) and lane.state.head.endswith('"content":')
    for text in (" world", ' "quoted" ', "tab\there", "naïve ✓", "\\n not a newline"):
        assert parse(_chunk(text), lane) == text
    assert whole.calls == learned  # none of them took the whole parse


@given(st.text(max_size=40))
def test_every_text_reads_as_the_whole_parse_reads_it(text: str) -> None:
    parse, lane = templated(wire._chat_text), _lane()
    parse(_chunk("warm"), lane)
    assert parse(_chunk(text), lane) == wire._chat_text(_chunk(text), _lane())


def test_a_chunk_that_differs_beyond_its_text_takes_the_whole_parse() -> None:
    parse, lane = templated(wire._chat_text), _lane()
    parse(_chunk("warm"), lane)
    head, tail = lane.state.head, lane.state.tail  # type: ignore[union-attr]
    # the same two ends with more than one string between: never read as text
    forged = head + '"a","tool_calls":[{"id":"x"}]' + tail
    assert parse(forged, lane) is None
    assert parse(head + '"a" , "b"' + tail, lane) is None
    assert parse(head + '""' + tail, lane) is None  # an empty text is no delta
    finished = _chunk("end").replace('"finish_reason":null', '"finish_reason":"stop"')
    assert parse(finished, lane) is None
    assert parse(_chunk("x", tool_calls=[{"id": "t"}]), lane) is None


def test_another_model_is_left_to_the_ordinary_path() -> None:
    parse, lane = templated(wire._chat_text), _lane()
    parse(_chunk("warm"), lane)
    lane.model = "m2"  # the ordinary path saw another model since
    assert parse(_chunk("old model"), lane) is None
    assert parse(_chunk("new", model="m2"), lane) == "new"


def test_chunks_that_always_differ_stop_being_learned() -> None:
    whole = _Counting()
    parse, lane = templated(whole), _lane()
    for i in range(10):
        assert parse(_chunk(f"t{i}", cid=f"chatcmpl-{i}"), lane) == f"t{i}"
    assert lane.state.tries == LEARN_TRIES  # type: ignore[union-attr]
    assert whole.calls == 10 + LEARN_TRIES  # each chunk whole, and one probe per try


class _Reader:
    """A fast lane's body tap as the network read calls it, with the chunks it passed on,
    the whole parse counted."""

    def __init__(self) -> None:
        import codecs

        from evacore.providers._sse import SSEDecoder
        from evacore.providers.base import TextTap

        self.whole = _Counting()
        self.events = 0
        """Events read through the adapter's parse (its template or its whole parse)."""
        self.given: list[list[str]] = []
        tap = TextTap()
        tap.take = lambda texts: self.given.append(texts) is None
        parse = templated(self.whole)

        def fast_text(data: str, lane: FastLane) -> str | None:
            self.events += 1
            return parse(data, lane)

        self.lane = FastLane(tap, fast_text, Deadlines(Timeouts()))
        self.lane.model = "m1"
        self.read = self.lane.reader(SSEDecoder(), codecs.getincrementaldecoder("utf-8")())

    def texts(self, body: bytes) -> list[str] | None:
        before = len(self.given)
        return self.given[-1] if self.read(body) and len(self.given) > before else None


def _event(data: str, field: str = "data: ", end: str = "\n\n") -> bytes:
    return (field + data + end).encode()


def test_a_whole_chunk_of_one_learned_event_is_read_without_the_parse() -> None:
    reader = _Reader()
    assert reader.texts(_event(_chunk("Hello"))) == ["Hello"]
    learned, parsed = reader.whole.calls, reader.events
    for text in (" world", ' "quoted" ', "tab\there", "naïve ✓", "\\n not a newline", "\u2028"):
        assert reader.texts(_event(_chunk(text))) == [text]
    assert (reader.whole.calls, reader.events) == (learned, parsed)  # from the bytes alone
    # the same ends in another framing or with more in them take the usual read, as before
    assert reader.texts(_event(_chunk("a"), field="data:")) == ["a"]
    assert reader.texts(_event(_chunk("b"), end="\r\n\r\n")) == ["b"]
    assert reader.texts(_event(_chunk("c")) + _event(_chunk("d"))) == ["c", "d"]
    assert reader.whole.calls == learned and reader.events == parsed + 4


def test_a_whole_chunk_reads_as_the_usual_read_or_is_refused() -> None:
    reader = _Reader()
    reader.texts(_event(_chunk("warm")))
    head, tail = reader.lane.state.head, reader.lane.state.tail  # type: ignore[union-attr]
    # a space before the string is still JSON: the whole parse reads it
    assert reader.texts(_event(head + ' "lead"' + tail)) == ["lead"]
    refused = [
        _event(head + '"a","tool_calls":[{"id":"x"}]' + tail),
        _event(head + '"a" , "b"' + tail),
        _event(head + '""' + tail),
        _event(head + '"x\ny"' + tail),  # a line break inside: two lines, no JSON string
        _event(head + "1" + tail),
        (b"data: " + head.encode() + b'"\xff"' + tail.encode() + b"\n\n"),  # not UTF-8
        _event(_chunk("unended"), end="\n"),
        _event(_chunk("end").replace('"finish_reason":null', '"finish_reason":"stop"')),
    ]
    for body in refused:
        assert reader.texts(body) is None, body
    reader.lane.model = "m2"  # the ordinary path saw another model since
    assert reader.texts(_event(_chunk("old model"))) is None


@given(st.text(max_size=40), st.sampled_from(["", " ", "  "]))
def test_any_whole_chunk_reads_as_the_usual_read_reads_it(text: str, pad: str) -> None:
    reader, usual = _Reader(), _Reader()
    reader.texts(_event(_chunk("warm")))
    head, tail = reader.lane.state.head, reader.lane.state.tail  # type: ignore[union-attr]
    body = _event(head + orjson.dumps(text).decode() + pad + tail)
    # `usual` learned no shape yet: its chunk takes the decode, split and whole parse
    assert reader.texts(body) == usual.texts(body)


async def test_a_streams_first_model_name_taken_by_the_lane_reaches_the_answer() -> None:
    """A first text chunk the fast lane took (the ordinary path saw no chunk yet) names the
    model; the answer's `Finish` carries it even when no later chunk names one."""
    from evacore.providers._sse import SSEEvent
    from evacore.providers.base import Finish

    lane = _lane(model=None)
    assert wire.fast_chat_text(_chunk("Hello"), lane) == "Hello"
    assert lane.model == "m1"
    # a chunk naming another model once the lane holds one is left to the ordinary path
    assert wire.fast_chat_text(_chunk("x", model="m9"), lane) is None
    # a name that is no string is never taken as the stream's first
    odd = _lane(model=None)
    assert wire.fast_chat_text(_chunk("x", model=7), odd) is None and odd.model is None  # type: ignore[arg-type]

    async def rest():  # what the ordinary path reads after it: the finish, unnamed
        yield SSEEvent("message", orjson.dumps({"choices": [
            {"index": 0, "delta": {}, "finish_reason": "stop"}]}).decode())
        yield SSEEvent("message", "[DONE]")

    seen = [e async for e in wire.parse_openai_stream(rest(), None, chat=True, lane=lane)]  # type: ignore[arg-type]
    assert isinstance(seen[-1], Finish) and seen[-1].model == "m1"
