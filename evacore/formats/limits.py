"""Size, count and shape limits applied while reading untrusted interchange files.

Must not: read files or raise errors itself; readers check these numbers and raise.
"""

from __future__ import annotations

from dataclasses import dataclass

MiB = 1024 * 1024

MAX_MESSAGE_CHARS = 1_000_000
"""Characters in one chat message: the HTTP API's cap on `message.content`, and the cap on
an imported message and each of its swipes."""


@dataclass(frozen=True)
class Limits:
    """Caps for one import; pass your own instance to any reader to change them."""

    max_input_bytes: int = 128 * MiB
    """Whole input file (PNG, JSON, CHARX, JSONL, preset)."""
    max_text_bytes: int = 16 * MiB
    """One PNG text chunk (stored and inflated), a JSON card file, CHARX `card.json`, a
    lorebook file, or one line of a chat JSONL."""
    max_json_depth: int = 64
    """Nesting of JSON arrays/objects, checked before parsing."""
    max_zip_entries: int = 2000
    """Entries in a CHARX archive."""
    max_zip_total_bytes: int = 256 * MiB
    """Uncompressed bytes read from a CHARX archive (declared sizes and actual reads)."""
    max_lore_entries: int = 100_000
    """Entries in one lorebook (a World Info file or a card's `character_book`), counted
    before the file is parsed."""
    max_chat_messages: int = 100_000
    """Lines of a chat JSONL (messages plus the header), counted while the upload arrives."""
    max_message_chars: int = MAX_MESSAGE_CHARS
    """Characters in one imported chat message or swipe."""
    max_image_pixels: int = 4096 * 4096
    """Width × height of a card image or image asset, read from its header before any pixel
    is decoded (16.8 megapixels: 64 MiB once decoded as RGBA)."""


DEFAULT_LIMITS = Limits()
