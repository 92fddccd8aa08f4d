"""Lorebooks for a tour: the stored books that apply to a chat (its own, its persona's, the
global selection, its character's), kept as `Lorebook` objects between tours, and the World
Info settings in force (global, overridden per chat).

Must not: scan or build prompts (lore.scan and pipeline stage 4 do). evacore.lore itself
stays pure; this is where lorebooks meet the database.
A cached book is reused while its row's `updated_at` is unchanged, so the engine's
compiled-key cache (keyed by book object) keeps hitting across tours.
"""

from __future__ import annotations

import dataclasses
import math
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from evacore.errors import InvalidInput
from evacore.lore.model import MAX_SCAN_DEPTH, CharacterStrategy, Lorebook, WorldInfoSettings
from evacore.lore.records import SourcedBook
from evacore.store import lorebooks as store
from evacore.store.recall import recall
from evacore.store.settings import get_setting
from evacore.store.tables import Chat

SETTING_KEY = "world_info"
_SOURCES = {"chat": "chat", "persona": "persona", "global": "global", "character": "character"}

_INTS = {"depth": MAX_SCAN_DEPTH, "budget_cap": 10**9, "min_activations": 10**6,
         "min_activations_depth_max": MAX_SCAN_DEPTH, "max_recursion_steps": 10**6}
_BOOLS = ("recursive", "include_names", "case_sensitive", "match_whole_words",
          "use_group_scoring", "overflow_alert")


# -- settings -----------------------------------------------------------------------------

def _check_value(name: str, value: Any) -> Any:
    """The normalised value of one World Info setting; ValueError describes a bad one."""
    if name in _INTS:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
            raise ValueError(f"{name} must be a whole number")
        if not 0 <= value <= _INTS[name]:
            raise ValueError(f"{name} must be between 0 and {_INTS[name]}")
        return int(value)
    if name == "budget":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError("budget must be a number (a % of the context)")
        if not 0 <= value <= 100:
            raise ValueError("budget must be between 0 and 100 (%)")
        return value
    if name in _BOOLS:
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be true or false")
        return value
    if name == "character_strategy":
        try:
            return CharacterStrategy.parse(value).name.lower()
        except ValueError:
            raise ValueError("character_strategy must be evenly, character_first or global_first"
                             ) from None
    raise ValueError(f"unknown World Info setting {name!r}")


def parse_world_info(data: Any, *, strict: bool) -> tuple[dict[str, Any], list[str]]:
    """Normalise a `world_info` object (our names or SillyTavern's `world_info_*` names).

    Returns (values set, problems). `strict`: any problem raises InvalidInput (API input);
    otherwise bad keys are dropped and described (a chat's stored override). A `null` value
    stands for "not set" and is left out."""
    if data is None:
        return {}, []
    if not isinstance(data, Mapping):
        if strict:
            raise InvalidInput("world_info must be an object")
        return {}, ["world_info is not an object; ignored"]
    out: dict[str, Any] = {}
    problems: list[str] = []
    for key, value in data.items():
        name = str(key).removeprefix("world_info_")
        if value is None:
            continue
        try:
            out[name] = _check_value(name, value)
        except ValueError as exc:
            problems.append(str(exc))
    if problems and strict:
        raise InvalidInput("world_info: " + "; ".join(problems))
    return out, problems


async def global_world_info(session: AsyncSession) -> dict[str, Any]:
    """The stored global World Info settings (only keys set), normalised."""
    values, _ = parse_world_info(await get_setting(session, SETTING_KEY), strict=False)
    return values


def effective_settings(global_values: Mapping[str, Any], chat_settings: Mapping[str, Any]
                       ) -> tuple[WorldInfoSettings, list[str]]:
    """Global settings with the chat's `settings.world_info` laid over them."""
    chat_values, problems = parse_world_info(chat_settings.get("world_info"), strict=False)
    merged = {**global_values, **chat_values}
    return WorldInfoSettings.from_dict(merged), [f"chat settings: {p}" for p in problems]


# -- books for a tour ---------------------------------------------------------------------

@dataclass(frozen=True)
class TourBook:
    """A book as scanned in one tour. `book.name` is the name the engine sees (the stored
    name, or `name [id]` when two different stored books share a name)."""

    id: str
    source: str
    book: Lorebook


@dataclass
class TourBooks:
    books: list[TourBook] = field(default_factory=list)
    problems: list[dict[str, Any]] = field(default_factory=list)
    """Books or entries left out because their stored data is malformed."""
    loaded: int = 0
    """Books read from the database for this tour (the rest came from the cache)."""

    def sourced(self) -> list[SourcedBook]:
        return [SourcedBook(tb.book, tb.source) for tb in self.books]  # type: ignore[arg-type]

    def ids_by_name(self) -> dict[str, str]:
        return {tb.book.name: tb.id for tb in self.books}


class LoreService:
    """Stored books as `Lorebook` objects, cached by (id, updated_at), least recently used
    dropped past `max_books`."""

    def __init__(self, max_books: int = 512) -> None:
        self.max_books = max_books
        self._cache: OrderedDict[str, tuple[str, Lorebook, list[dict[str, Any]]]] = OrderedDict()

    def _get(self, book_id: str, stamp: str) -> tuple[Lorebook, list[dict[str, Any]]] | None:
        hit = self._cache.get(book_id)
        if hit is None or hit[0] != stamp:
            return None
        self._cache.move_to_end(book_id)
        return hit[1], hit[2]

    def _put(self, book_id: str, stamp: str, book: Lorebook, problems: list[dict[str, Any]]) -> None:
        self._cache[book_id] = (stamp, book, problems)
        self._cache.move_to_end(book_id)
        while len(self._cache) > self.max_books:
            self._cache.popitem(last=False)

    def forget(self, book_id: str) -> None:
        self._cache.pop(book_id, None)

    async def books_for(self, session: AsyncSession, *, chat_id: str | None,
                        character_id: str | None, persona_id: str | None) -> TourBooks:
        """Every book linked to the chat, its character, its persona or globally."""
        links = await recall(
            session, "lore", (chat_id, character_id, persona_id),
            lambda: store.linked_books(session, chat_id=chat_id, character_id=character_id,
                                       persona_id=persona_id))
        out = TourBooks()
        stamps = {book_id: f"{name}\x1f{updated.isoformat()}"
                  for book_id, _, name, updated in links}
        books: dict[str, Lorebook] = {}
        missing = []
        for book_id, stamp in stamps.items():
            hit = self._get(book_id, stamp)
            if hit is None:
                missing.append(book_id)
            else:
                books[book_id] = hit[0]
                out.problems.extend(hit[1])
        if missing:
            rows = {r.id: r for r in [await store.get_book_row(session, i) for i in missing]}
            entries = await store.entry_rows_of(session, missing)
            for book_id in missing:
                problems: list[dict[str, Any]] = []
                book = store.book_from_rows(rows[book_id], entries[book_id], problems=problems)
                self._put(book_id, stamps[book_id], book, problems)
                books[book_id] = book
                out.problems.extend(problems)
            out.loaded = len(missing)
        names: dict[str, set[str]] = {}
        for book_id, book in books.items():
            names.setdefault(book.name, set()).add(book_id)
        for book_id, kind, _, _ in links:
            book = books[book_id]
            if len(names[book.name]) > 1:
                book = self._renamed(book_id, stamps[book_id], book)
            out.books.append(TourBook(book_id, _SOURCES[kind], book))
        return out

    def _renamed(self, book_id: str, stamp: str, book: Lorebook) -> Lorebook:
        """A copy named `name [id]`, itself cached so the engine's key cache keeps hitting."""
        key = f"renamed:{book_id}"
        hit = self._get(key, stamp)
        if hit is not None:
            return hit[0]
        copy = dataclasses.replace(book, name=f"{book.name} [{book_id}]")
        self._put(key, stamp, copy, [])
        return copy


async def chat_length(session: AsyncSession, chat_id: str, *, leave_out: str | None = None) -> int:
    """The `turn` of a scan: messages the chat has had (`leave_out`, the answer being replaced
    by a swipe or regenerate, not counted). Read from the chat's position counter, so it costs
    the same for a chat of ten messages or a hundred thousand; it never goes back when a
    message is deleted, which keeps timed effects (sticky, cooldown) monotonic."""
    count = await session.scalar(select(Chat.next_position).where(Chat.id == chat_id))
    return max(int(count or 0) - (1 if leave_out else 0), 0)
