"""Helpers for the import/export tests: uploads, row counts, fixture paths.

Must not: hold assertions of their own beyond response status checks.
"""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import func, select

from evacore.core import Core
from evacore.store.tables import (
    Character,
    CharacterAsset,
    Chat,
    Lorebook,
    LorebookLink,
    LoreEntry,
    Message,
    Persona,
    Preset,
    Variant,
)
from tests.helpers import FIXTURES  # noqa: E402,I001

CARDS = sorted((FIXTURES / "cards").glob("*.png"))
CHATS = sorted((FIXTURES / "chats").glob("*.jsonl"))
PRESETS = sorted((FIXTURES / "presets").rglob("*.json"))
TABLES = (Character, CharacterAsset, Lorebook, LoreEntry, LorebookLink, Preset, Persona, Chat,
          Message, Variant)


async def upload(client: httpx.AsyncClient, url: str, content: bytes,
                 filename: str = "upload.bin", expect: int | None = 201,
                 **fields: str) -> httpx.Response:
    r = await client.post(url, files={"file": (filename, content)}, data=fields or None)
    if expect is not None:
        assert r.status_code == expect, r.text
    return r


async def row_counts(core: Core) -> dict[str, int]:
    async with core.session() as s:
        return {t.__tablename__: int(await s.scalar(select(func.count()).select_from(t)) or 0)
                for t in TABLES}


def without_dates(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k != "modification_date"}
