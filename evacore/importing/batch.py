"""Import files of any supported kind into the database, one transaction per file.

Must not: print or parse arguments (cli/transfer.py does); a bad file becomes a `failed`
result and the run goes on. Chats go last so they can find the characters they talk to.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError

from evacore.core import Core
from evacore.errors import EvacoreError, TooLarge
from evacore.formats.cards import read_card
from evacore.formats.presets import read_preset
from evacore.formats.st_chat import read_st_chat
from evacore.formats.worldinfo import load_world_info_file, read_world_info
from evacore.importing.characters import store_card
from evacore.importing.chats import store_st_chat
from evacore.importing.detect import detect_kind
from evacore.importing.presets import store_presets
from evacore.importing.upload import import_limits
from evacore.store.characters import find_by_name
from evacore.store.connections import default_connection
from evacore.store.lorebooks import save_lorebook
from evacore.store.tables import User

Status = Literal["imported", "skipped", "failed"]
_ORDER = {"lorebook": 0, "preset": 1, "card": 2, "chat": 3}


@dataclass
class FileResult:
    path: Path
    kind: str | None
    status: Status
    detail: str
    ids: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def collect_files(paths: Iterable[Path]) -> list[Path]:
    """Files named and files under folders named (recursively, sorted); hidden files are
    kept so the summary says why they were skipped. A missing path raises FileNotFoundError."""
    out: dict[Path, None] = {}
    for path in paths:
        if path.is_dir():
            for item in sorted(path.rglob("*")):
                if item.is_file():
                    out.setdefault(item, None)
        elif path.is_file():
            out.setdefault(path, None)
        else:
            raise FileNotFoundError(str(path))
    return list(out)


class Importer:
    """Imports files into one core; chats belong to `user_id` (default: the master)."""

    def __init__(self, core: Core, *, user_id: str | None = None) -> None:
        self.core = core
        self.user_id = user_id
        self.limits = import_limits(core)

    async def _owner(self) -> str | None:
        if self.user_id is None:
            async with self.core.session() as s:
                stmt = select(User.id).where(User.role == "master").order_by(User.created_at)
                self.user_id = (await s.scalars(stmt.limit(1))).first()
        return self.user_id

    def _read(self, path: Path) -> bytes:
        size = path.stat().st_size
        if size > self.limits.max_input_bytes:
            raise TooLarge(f"the file is {size} bytes; the limit is "
                           f"{self.limits.max_input_bytes}")
        return path.read_bytes()

    def kind_of(self, path: Path) -> FileResult | str:
        """The file's kind, or a finished (skipped/failed) result."""
        try:
            kind = detect_kind(self._read(path))
        except (EvacoreError, OSError) as exc:
            return FileResult(path, None, "failed", _reason(exc))
        if kind is None:
            return FileResult(path, None, "skipped", "not a card, lorebook, preset or chat")
        return kind

    async def import_file(self, path: Path, kind: str) -> FileResult:
        try:
            data = self._read(path)
            return await getattr(self, f"_import_{kind}")(path, data)
        except (EvacoreError, OSError, SQLAlchemyError) as exc:
            return FileResult(path, kind, "failed", _reason(exc))

    async def _import_card(self, path: Path, data: bytes) -> FileResult:
        card = read_card(data, filename=path.name, limits=self.limits)
        async with self.core.session() as s:
            stored = await store_card(s, card)
        ids = [stored.character.id] + ([stored.lorebook_id] if stored.lorebook_id else [])
        detail = f"character {stored.character.name!r}"
        if stored.lorebook_id:
            detail += " with its lorebook"
        return FileResult(path, "card", "imported", detail, ids, stored.warnings)

    async def _import_lorebook(self, path: Path, data: bytes) -> FileResult:
        obj = load_world_info_file(data, self.limits)  # size and entries checked first
        book = read_world_info(obj)
        if not book.name:
            book = read_world_info(obj, name=path.stem)
        cap = self.limits.max_lore_entries
        if len(book.entries) > cap:
            raise TooLarge(f"a lorebook holds at most {cap} entries", limit=cap)
        async with self.core.session() as s:
            row = await save_lorebook(s, book)
        return FileResult(path, "lorebook", "imported",
                          f"lorebook {row.name!r} ({len(book.entries)} entries)", [row.id])

    async def _import_preset(self, path: Path, data: bytes) -> FileResult:
        presets = read_preset(data, limits=self.limits)
        async with self.core.session() as s:
            stored = await store_presets(s, presets)
        names = ", ".join(f"{p.preset.kind} {p.preset.name!r}" for p in stored)
        return FileResult(path, "preset", "imported", f"preset {names}",
                          [p.preset.id for p in stored])

    async def _import_chat(self, path: Path, data: bytes) -> FileResult:
        st = read_st_chat(data, limits=self.limits)
        owner = await self._owner()
        async with self.core.session() as s:
            matches = await find_by_name(s, st.character_name) if st.character_name else []
            character_id = matches[0].id if len(matches) == 1 else None
            connection = await default_connection(s)
            stored = await store_st_chat(s, st, user_id=owner, connection_id=connection.id,
                                         character_id=character_id)
        detail = f"chat with {stored.messages} message{'' if stored.messages == 1 else 's'}"
        if character_id:
            detail += f" (character {st.character_name!r})"
        return FileResult(path, "chat", "imported", detail, [stored.chat.id], stored.warnings)

    async def run(self, files: list[Path],
                  progress: Callable[[FileResult], None] | None = None) -> list[FileResult]:
        """Import every file (chats last); `progress` is called once per file."""
        results: list[FileResult] = []
        pending: list[tuple[Path, str]] = []
        for path in files:
            kind = self.kind_of(path)
            if isinstance(kind, FileResult):
                results.append(kind)
                if progress:
                    progress(kind)
            else:
                pending.append((path, kind))
        pending.sort(key=lambda item: _ORDER[item[1]])
        for path, kind in pending:
            result = await self.import_file(path, kind)
            results.append(result)
            if progress:
                progress(result)
        return results


def _reason(exc: BaseException) -> str:
    if isinstance(exc, EvacoreError):
        return exc.message
    if isinstance(exc, SQLAlchemyError):
        return f"the database refused it: {type(exc.__cause__ or exc).__name__}"
    if isinstance(exc, OSError):
        return f"cannot read the file: {exc.strerror or exc}"
    return str(exc)

