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
