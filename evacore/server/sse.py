"""Server-sent events: `event: <name>` + `data: <json>` lines (R8.4, R12.4).

Must not: decide what is sent; it only frames the tour's events.
"""

from __future__ import annotations

from typing import Any

import orjson

DELTA_START = b'event: delta\ndata: {"text":'
DELTA_END = b"}\n\n"
"""A `delta` event with only a text in it (a relayed token) is its JSON between these."""


def delta_frame(text: str) -> bytes:
    """The frame of a `delta` event with only `text` in it (a relayed token)."""
    return DELTA_START + orjson.dumps(text) + DELTA_END


def sse_frame(name: str, data: dict[str, Any]) -> bytes:
    if name == "delta" and len(data) == 1:
        text = data.get("text")
        if type(text) is str:  # a relayed token: its frame around its text's JSON
            return delta_frame(text)
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"
