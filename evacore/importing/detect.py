"""Tell what an interchange file holds by its content: a card, a lorebook, a preset or a chat.

Must not: trust file names or store anything; a file it cannot place is `None` (skipped).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from evacore.errors import ImportInvalid
from evacore.formats.presets import MASTER_KEYS, SIGNATURES

Kind = Literal["card", "lorebook", "preset", "chat"]
KINDS: tuple[str, ...] = ("card", "lorebook", "preset", "chat")

_PNG = b"\x89PNG\r\n\x1a\n"
_ZIP = b"PK\x03\x04"
_CARD_SPECS = ("chara_card_v2", "chara_card_v3")
_V1_KEYS = ("first_mes", "mes_example", "personality", "scenario", "char_name", "char_greeting")
_CHAT_HEADER = ("user_name", "character_name", "chat_metadata")


def _load(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _object_kind(obj: dict[str, Any]) -> Kind | None:
    spec = obj.get("spec")
    if spec in _CARD_SPECS:
        return "card"
    if spec == "lorebook_v3" or "entries" in obj:
        return "lorebook"
    if "mes" in obj or ("user_name" in obj and "character_name" in obj) or (
            "chat_metadata" in obj and "name" not in obj):
        return "chat"
    if "name" in obj and any(key in obj for key in _V1_KEYS):
        return "card"
    if any(all(key in obj for key in keys) for keys in SIGNATURES.values()):
        return "preset"
    if obj and all(isinstance(v, dict) for v in obj.values()) and any(k in MASTER_KEYS
                                                                      for k in obj):
        return "preset"
    return None


def detect_kind(data: bytes) -> Kind | None:
    """The kind of an importable file, or None when it is none of them; a file that starts
    like JSON but does not parse raises ImportInvalid."""
    if data.startswith((_PNG, _ZIP)):
        return "card"
    if data.startswith(b"\xff\xd8\xff") and _ZIP in data:
        return "card"
    raw = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
    if raw.lstrip()[:1] != b"{":
        return None
    text = raw.decode("utf-8", errors="replace")
    whole = _load(text)
    if isinstance(whole, dict):
        return _object_kind(whole)
    first_line = text.lstrip().split("\n", 1)[0]
    head = _load(first_line)
    if isinstance(head, dict) and (any(k in head for k in _CHAT_HEADER) or "mes" in head):
        return "chat"
    if whole is None and head is None:
        raise ImportInvalid("the file starts like JSON but is not valid JSON")
    return None
