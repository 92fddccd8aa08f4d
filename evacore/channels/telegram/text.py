"""What an answer looks like in Telegram (R14.2): the reply tail `↩ #<id>` read and removed,
Markdown turned into plain text plus entities (never `parse_mode`, so never a parse
error), and a long answer split under Telegram's 4,096 characters at paragraph ends
(then line ends, then spaces).

Must not: send anything or change what is stored: the chat keeps the answer as written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import telegramify_markdown

LIMIT = 4096
"""Telegram's longest message text, in UTF-16 code units."""
TAIL = re.compile(r"[\s\u00a0]*↩\ufe0f?[\s\u00a0]*#(\d{1,18})[\s\u00a0]*$")
"""The reply tail at the very end of an answer (the seeded `telegram_reply_tail` rule's)."""


@dataclass
class Part:
    """One message to send: its text and entities (`MessageEntity` fields as plain dicts)."""

    text: str
    entities: list[dict[str, Any]] = field(default_factory=list)


def split_tail(answer: str) -> tuple[str, int | None]:
    """The answer without its reply tail, and the message id the tail names (or None)."""
    found = TAIL.search(answer)
    if found is None:
        return answer, None
    return answer[: found.start()].rstrip(), int(found.group(1))


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def render(markdown: str) -> Part:
    """Markdown as Telegram's plain text and entities; text the converter cannot read is
    sent as it is, without entities."""
    try:
        text, entities = telegramify_markdown.convert(markdown, latex_escape=False)
    except Exception:  # noqa: BLE001 - a converter fault must never lose the answer
        return Part(markdown)
    out = []
    for e in entities:
        item = {"type": e.type, "offset": e.offset, "length": e.length}
        for key in ("url", "language", "custom_emoji_id"):
            value = getattr(e, key, None)
            if value:
                item[key] = value
        out.append(item)
    return Part(text.rstrip("\n") if text.strip() else markdown, out if text.strip() else [])


def split(part: Part, limit: int = LIMIT) -> list[Part]:
    """`part` in pieces of at most `limit` UTF-16 units, cut at the last paragraph end that
    fits, else the last line end, else the last space, else anywhere; entities are clipped
    to each piece and shifted to its start."""
    text = part.text
    # work in UTF-16 units, as entity offsets are
    units = text.encode("utf-16-le")
    total = len(units) // 2
    pieces: list[Part] = []
    start = 0
    while start < total:
        end = min(start + limit, total)
        if end < total:
            end = _cut(units, start, end)
        chunk = units[start * 2: end * 2].decode("utf-16-le")
        lead = len(chunk) - len(chunk.lstrip())
        trail = len(chunk.rstrip())
        shown = chunk.strip()
        if shown:
            first = start + utf16_len(chunk[:lead])
            last = start + utf16_len(chunk[:trail])
            pieces.append(Part(shown, _clip(part.entities, first, last)))
        start = end
    return pieces or [Part(text.strip() or text)]


def _cut(units: bytes, start: int, end: int) -> int:
    """Where to end a piece that starts at `start` and may reach `end` (UTF-16 units)."""
    window = units[start * 2: end * 2].decode("utf-16-le", errors="ignore")
    for sep in ("\n\n", "\n", " "):
        at = window.rfind(sep)
        if at > 0:
            return start + utf16_len(window[: at + len(sep)])
    # no boundary: cut anywhere, but never between the halves of a surrogate pair
    high = int.from_bytes(units[(end - 1) * 2: end * 2], "little")
    return end - 1 if 0xD800 <= high <= 0xDBFF else end


def _clip(entities: list[dict[str, Any]], first: int, last: int) -> list[dict[str, Any]]:
    out = []
    for e in entities:
        a, b = max(e["offset"], first), min(e["offset"] + e["length"], last)
        if b > a:
            out.append({**e, "offset": a - first, "length": b - a})
    return out


def parts_of(answer: str, limit: int = LIMIT) -> list[Part]:
    """The messages an answer (its tail already removed) is sent as; none for an empty one."""
    if not answer.strip():
        return []
    return split(render(answer), limit)


def draft_of(partial: str, limit: int = LIMIT) -> Part | None:
    """What a growing answer shows as a draft: its Markdown rendered, the first piece only."""
    if not partial.strip():
        return None
    text, _ = split_tail(partial)
    pieces = parts_of(text, limit)
    return pieces[0] if pieces else None
