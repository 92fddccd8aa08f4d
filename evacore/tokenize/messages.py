"""Token count of an OpenAI-format message list, including the chat format's overhead.

Must not: render templates; text-mode prompts are counted as the rendered string instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import orjson

from evacore.tokenize.profile import TokenizerProfile

TOKENS_PER_MESSAGE = 3
"""`<|start|>{role}\\n … <|end|>` around every message (OpenAI chat format)."""
TOKENS_PER_NAME = 1
"""A `name` field costs one token on top of its text."""
REPLY_PRIMING = 3
"""`<|start|>assistant<|message|>` that primes the reply, once per request."""
IMAGE_TOKENS = 85
"""Flat cost of one image part (OpenAI low-detail; SillyTavern counts the same)."""


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def count_messages(
    profile: TokenizerProfile,
    messages: Iterable[Mapping[str, Any]],
    *,
    count: Callable[[str], int] | None = None,
) -> int:
    """Σ over messages of (3 + tokens of each field value (+1 for `name`)) + 3.

    `content` may be a string or a list of parts (text parts counted, image parts
    `IMAGE_TOKENS` each); `tool_calls` and other structured values are counted as their
    compact JSON. Pass `count` (e.g. a `cached_count` partial) to reuse a cache.
    """
    counter = count or profile.count
    total = REPLY_PRIMING
    for message in messages:
        total += TOKENS_PER_MESSAGE
        for key, value in message.items():
            if value is None:
                continue
            if key == "content" and isinstance(value, list):
                total += _count_parts(counter, value)
            elif isinstance(value, str):
                total += counter(value)
            else:
                total += counter(_json(value))
            if key == "name":
                total += TOKENS_PER_NAME
    return total


def _count_parts(counter: Callable[[str], int], parts: list[Any]) -> int:
    total = 0
    for part in parts:
        if isinstance(part, Mapping):
            kind = part.get("type")
            if kind == "text":
                total += counter(str(part.get("text", "")))
            elif kind in ("image_url", "image", "input_image"):
                total += IMAGE_TOKENS
            else:
                total += counter(_json(part))
        else:
            total += counter(str(part))
    return total
