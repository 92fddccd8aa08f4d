"""The SSE decoder under the adapters (R2.12): line ends, comments, multi-line data, any split."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from evacore.providers._sse import SSEDecoder, SSEEvent

WIRE = (
    ": keep-alive comment\r\n"
    "event: message_start\r\n"
    'data: {"a": 1}\r\n'
    "\r\n"
    "data: line one\n"
    "data: line two\n"
    "\n"
    "data:no-space\r"
    "\r"
    "id: 7\n"
    "data: last\n"
)
EXPECTED = [
    SSEEvent("message_start", '{"a": 1}'),
    SSEEvent("message", "line one\nline two"),
    SSEEvent("message", "no-space"),
    SSEEvent("message", "last", "7"),
]


def decode(pieces: list[str]) -> list[SSEEvent]:
    decoder = SSEDecoder()
    out: list[SSEEvent] = []
    for piece in pieces:
        out += decoder.feed(piece)
    return out + decoder.flush()


def test_r2_12_sse_line_ends_comments_multiline_and_unterminated_last_event() -> None:
    assert decode([WIRE]) == EXPECTED


@given(st.lists(st.integers(min_value=0, max_value=len(WIRE)), max_size=12))
def test_r2_12_sse_any_chunk_split_gives_the_same_events(cuts: list[int]) -> None:
    points = sorted(set(cuts))
    pieces = [WIRE[a:b] for a, b in zip([0, *points], [*points, len(WIRE)], strict=True)]
    assert decode(pieces) == EXPECTED


def test_r2_12_sse_keeps_unicode_line_separators_inside_json() -> None:
    data = '{"t": "a\u2028b"}'
    assert decode([f"data: {data}\n\n"]) == [SSEEvent("message", data)]


def test_r2_12_sse_hands_on_a_bursts_first_event_before_reading_the_rest(monkeypatch) -> None:
    """A read that holds a whole answer (a fast model, a proxy's buffer) gives its first
    event to the relay before the other events are made: the first token is not held back
    by the parse of the rest."""
    from evacore.providers import _sse

    made: list[str] = []

    class Counted(SSEEvent):
        __slots__ = ()

        def __init__(self, event: str, data: str, id: str | None = None) -> None:
            made.append(data)
            super().__init__(event, data, id)

    monkeypatch.setattr(_sse, "SSEEvent", Counted)
    events = iter(SSEDecoder().feed("".join(f"data: {n}\n\n" for n in range(200))))
    assert next(events).data == "0"
    assert made == ["0"]
    assert [e.data for e in events] == [str(n) for n in range(1, 200)]


class _Reads:
    """A response body handing out the given reads one by one."""

    def __init__(self, reads: list[bytes]) -> None:
        self.reads = list(reads)

    async def read(self) -> bytes:
        return self.reads.pop(0) if self.reads else b""


async def _events(reads: list[bytes]) -> list[str]:
    from evacore.providers._transport import Deadlines, sse_events
    from evacore.providers.base import Connection, Timeouts

    conn = Connection(id="c", name="x", kind="openai-chat")
    return [e.data async for e in sse_events(_Reads(reads), Deadlines(Timeouts()), conn)]


async def test_r2_12_a_character_split_between_two_reads_arrives_whole() -> None:
    wire = 'data: {"t": "café 🙂"}\n\ndata: {"t": "ок"}\n\n'.encode()
    for cut in range(1, len(wire)):
        assert await _events([wire[:cut], wire[cut:]]) == ['{"t": "café 🙂"}', '{"t": "ок"}']


async def test_r2_12_bytes_that_are_not_utf8_become_replacement_characters() -> None:
    got = await _events([b'data: {"t": "a\xffb"}\n\n', b'data: {"t": "\xe2\x82"}\n\n'])
    assert got == ['{"t": "a\ufffdb"}', '{"t": "\ufffd"}']
