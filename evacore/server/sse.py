"""Server-sent events: `event: <name>` + `data: <json>` lines (R8.4, R12.4).

Must not: decide what is sent; it only frames the tour's events.
"""

from __future__ import annotations

from typing import Any

import orjson


def sse_frame(name: str, data: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"
