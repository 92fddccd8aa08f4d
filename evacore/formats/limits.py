"""Size and shape limits applied while reading untrusted interchange files.

Must not: read files or raise errors itself; readers check these numbers and raise.
"""

from __future__ import annotations

from dataclasses import dataclass

MiB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """Caps for one import; pass your own instance to any reader to change them."""

    max_input_bytes: int = 128 * MiB
    """Whole input file (PNG, JSON, CHARX, JSONL, preset)."""
    max_text_bytes: int = 16 * MiB
    """One PNG text chunk (stored and inflated), a JSON card file, or CHARX `card.json`."""
    max_json_depth: int = 64
    """Nesting of JSON arrays/objects, checked before parsing."""
    max_zip_entries: int = 2000
    """Entries in a CHARX archive."""
    max_zip_total_bytes: int = 256 * MiB
    """Uncompressed bytes read from a CHARX archive (declared sizes and actual reads)."""


DEFAULT_LIMITS = Limits()
