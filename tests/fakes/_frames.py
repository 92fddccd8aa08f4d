"""Shared bits of the fake wire formats: SSE framing, a frame marked as a text delta or not,
and deterministic token counts.

Must not: know a vendor's payloads.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Frame:
    data: str
    delta: bool = False  # counts for token_delay and the fault positions


def sse(payload: Any, event: str | None = None) -> str:
    data = payload if isinstance(payload, str) else json.dumps(payload)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {data}\n\n"


def fake_tokens(text: str) -> int:
    """A deterministic count for usage and the tokenize endpoints: words and punctuation."""
    return len(re.findall(r"\w+|[^\w\s]", text))


def split3(text: str) -> list[str]:
    """Arguments arrive in three fragments, as real servers split them."""
    if len(text) < 3:
        return [text]
    a, b = len(text) // 3, 2 * len(text) // 3
    return [text[:a], text[a:b], text[b:]]


def request_text(body: Any) -> str:
    return json.dumps(body.get("messages") or body.get("prompt") or "") if isinstance(
        body, dict) else ""
