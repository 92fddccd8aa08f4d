"""Small helpers for turning imported values into storable row values.

Must not: know any file format; it only makes ids and column-safe text.
"""

from __future__ import annotations

from typing import Any

from evacore.domain.ids import new_id
from evacore.errors import ImportInvalid


def ordered_ids(count: int) -> list[str]:
    """`count` fresh ids that sort in the order given (one random base, an index suffix)."""
    base = new_id()
    return [f"{base}{index:06x}" for index in range(count)]


def column_text(value: Any, max_len: int) -> str:
    """Text for a length-limited column: NUL removed (PostgreSQL text cannot hold it), cut."""
    text = value if isinstance(value, str) else ("" if value is None else str(value))
    return text.replace("\x00", "")[:max_len]


def nul_free(text: str, warnings: list[str], what: str) -> str:
    """Text for an unlimited column: NUL becomes U+FFFD (with a warning), like bad surrogates."""
    if "\x00" not in text:
        return text
    warnings.append(f"{what}: NUL characters were replaced by U+FFFD")
    return text.replace("\x00", "\ufffd")


def checked_name(value: Any, max_len: int, what: str) -> str:
    """A name that must fit its column as it is (renaming it would change the file)."""
    text = value if isinstance(value, str) else str(value)
    if "\x00" in text:
        raise ImportInvalid(f"{what} contains a NUL character")
    if len(text) > max_len:
        raise ImportInvalid(f"{what} is longer than {max_len} characters")
    return text
