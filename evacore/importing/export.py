"""Export stored characters, chats, presets or lorebooks into a folder, one file each.

Must not: print or parse arguments (cli/transfer.py does). File names come from the
things' names, made safe for every file system and never overwriting each other.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeVar

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from evacore.core import Core
from evacore.errors import InvalidInput, NotFound
from evacore.formats.presets import write_preset
from evacore.formats.st_chat import write_st_chat
from evacore.formats.worldinfo import write_world_info
from evacore.importing.characters import export_card, load_card
from evacore.importing.chats import chat_to_st
from evacore.importing.presets import preset_file
from evacore.store.lorebooks import list_lorebooks, load_lorebook
from evacore.store.tables import Character, Chat, Preset

T = TypeVar("T", Character, Chat, Preset)
What = Literal["characters", "chats", "presets", "lorebooks"]
WHATS: tuple[str, ...] = ("characters", "chats", "presets", "lorebooks")
_UNSAFE = re.compile(r'[\\/:*?"<>|\x00-\x1f\x7f]+')


def safe_name(name: str, fallback: str = "unnamed") -> str:
    """A file name stem: no separators or control characters, at most 120 characters."""
    stem = _UNSAFE.sub("_", name).strip(" .")[:120].strip(" .")
    return stem or fallback


@dataclass
class Exported:
    path: Path
    name: str


class _Folder:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.used: set[Path] = set()

    def write(self, stem: str, ext: str, data: bytes, sub: str | None = None) -> Path:
        folder = self.root / sub if sub else self.root
        folder.mkdir(parents=True, exist_ok=True)
        path, count = folder / f"{stem}.{ext}", 2
        while path in self.used or path.exists():
            path, count = folder / f"{stem}-{count}.{ext}", count + 1
        self.used.add(path)
        path.write_bytes(data)
        return path


async def _ids(core: Core, what: str) -> list[str]:
    async with core.session() as s:
        if what == "lorebooks":
            return [row.id for row in await list_lorebooks(s)]
        table = {"characters": Character, "chats": Chat, "presets": Preset}[what]
        return list((await s.scalars(select(table.id).order_by(table.id))).all())


async def _get(session: AsyncSession, table: type[T], item_id: str) -> T:
    row = await session.get(table, item_id)
    if row is None:
        raise NotFound(f"{table.__tablename__} row {item_id} vanished during the export")
    return row


async def _one(core: Core, what: str, item_id: str, fmt: str,
               folder: _Folder) -> Exported:
    async with core.session() as s:
        if what == "characters":
            character = await _get(s, Character, item_id)
            data, _, ext = export_card(await load_card(s, character), fmt)
            return Exported(folder.write(safe_name(character.name), ext, data), character.name)
        if what == "chats":
            chat = await _get(s, Chat, item_id)
            data = write_st_chat(await chat_to_st(s, chat))
            return Exported(folder.write(safe_name(chat.title, "chat"), "jsonl", data), chat.title)
        if what == "presets":
            preset = await _get(s, Preset, item_id)
            path = folder.write(safe_name(preset.name), "json", write_preset(preset_file(preset)),
                                sub=safe_name(preset.kind))
            return Exported(path, f"{preset.kind} {preset.name}")
        book = await load_lorebook(s, item_id)
        return Exported(folder.write(safe_name(book.name, "lorebook"), "json",
                                     write_world_info(book)), book.name)


async def export_all(core: Core, what: str, dest: Path, fmt: str = "png",
                     progress: Callable[[int, Exported], None] | None = None) -> list[Exported]:
    """Write every stored item of `what` under `dest`; `progress(total, item)` per file.

    Characters use `fmt` (png, json or charx); chats are JSONL, presets go in one
    sub-folder per kind, lorebooks are World Info JSON.
    """
    if what not in WHATS:
        raise InvalidInput(f"export what? one of {', '.join(WHATS)}")
    if what == "characters" and fmt not in ("png", "json", "charx"):
        raise InvalidInput("format must be png, json or charx")
    ids = await _ids(core, what)
    folder = _Folder(dest)
    out = []
    for item_id in ids:
        item = await _one(core, what, item_id, fmt, folder)
        out.append(item)
        if progress:
            progress(len(ids), item)
    return out
