"""Split text into overlapping chunks for the retrieval index (documents and long messages).

Must not: know where the text came from or store anything.
"""

from __future__ import annotations

import re

_BREAKS = (re.compile(r"\n\s*\n"), re.compile(r"\n"), re.compile(r"(?<=[.!?…])\s+"),
           re.compile(r"\s+"))


def chunk_text(text: str, size: int = 1200, overlap: int = 200) -> list[str]:
    """Chunks of at most `size` characters, each starting `overlap` characters (rounded to a
    word) before the previous one ended. Cuts prefer a paragraph, then a line, a sentence,
    a space; a text within `size` is one chunk. Empty text gives no chunks."""
    if size < 50:
        raise ValueError("chunk size must be at least 50 characters")
    overlap = max(0, min(overlap, size // 2))
    text = text.strip()
    if not text:
        return []
    chunks: list[str] = []
    start = 0
    while start < len(text):
        end = min(len(text), start + size)
        if end < len(text):
            end = _cut(text, start, end, size)
        piece = text[start:end].strip()
        if piece:
            chunks.append(piece)
        if end >= len(text):
            break
        nxt = max(end - overlap, start + 1)
        if overlap:
            space = text.find(" ", nxt, end)
            nxt = space + 1 if space != -1 else nxt
        start = nxt
    return chunks


def _cut(text: str, start: int, end: int, size: int) -> int:
    """The best break in the last half of the window [start, end)."""
    floor = start + size // 2
    window = text[floor:end]
    for pattern in _BREAKS:
        hits = list(pattern.finditer(window))
        if hits:
            return floor + hits[-1].start() if hits[-1].start() > 0 else floor + hits[-1].end()
    return end
