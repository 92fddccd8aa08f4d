"""A relayed token's SSE frame is built around its text's JSON (`server/sse.py`): the same
bytes as framing the whole event, for any text, and any other event framed whole."""

from __future__ import annotations

import orjson
import pytest

from evacore.server.sse import sse_frame


def _whole(name: str, data: dict) -> bytes:  # type: ignore[type-arg]
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


@pytest.mark.parametrize("text", ["", " token", 'a "quoted" \\ back', "юникод 🎉 日本",
                                  "line\nbreak\r\u2028\x00\x1f", "x" * 5000])
def test_a_delta_frame_is_the_whole_event_framed(text: str) -> None:
    assert sse_frame("delta", {"text": text}) == _whole("delta", {"text": text})
    parsed = orjson.loads(sse_frame("delta", {"text": text}).split(b"data: ", 1)[1])
    assert parsed == {"text": text}


@pytest.mark.parametrize(("name", "data"), [
    ("delta", {"text": "x", "step": 1}),  # more than the text: framed whole
    ("delta", {"text": None}),
    ("done", {"tour_id": "t", "finish_reason": "stop"}),
    ("error", {"code": "aborted", "message": "the tour was aborted"}),
])
def test_other_events_are_framed_whole(name: str, data: dict) -> None:  # type: ignore[type-arg]
    assert sse_frame(name, data) == _whole(name, data)
