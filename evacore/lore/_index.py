"""Compile a set of sourced books for scanning: merge and order them as SillyTavern does,
parse keys and decorators, build the key matcher; cached by a content hash.

Must not: look at a chat or a haystack; everything here depends only on the books and on
the global case-sensitivity setting.
"""

from __future__ import annotations

import gc
import hashlib
import re
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson

from evacore.lore._keys import (
    UnsupportedRegex,
    compile_regex_key,
    is_single_word,
    parse_decorators,
    split_groups,
)
from evacore.lore._matcher import KeyMatcher
from evacore.lore.model import MAX_SCAN_DEPTH, CharacterStrategy, Lorebook, LoreEntry
from evacore.lore.records import SourcedBook

PLAIN, REGEX, DYNAMIC, NEVER = 0, 1, 2, 3
_LEGACY_MACRO = re.compile(r"<(?:user|bot|char)", re.IGNORECASE)

EXTRA_KINDS: tuple[tuple[str, str], ...] = (
    ("match_persona_description", "persona description"),
    ("match_character_description", "character description"),
    ("match_character_personality", "character personality"),
    ("match_character_depth_prompt", "character depth prompt"),
    ("match_scenario", "scenario"),
    ("match_creator_notes", "creator notes"),
)


class KeyRef(NamedTuple):
    text: str
    """Trimmed key (raw key for DYNAMIC ones, substituted at scan time)."""
    kind: int
    pid: int = -1
    single: bool = False


class ScanEntry:
    """An entry ready to scan: its place in the merged order and its parsed parts."""

    __slots__ = (
        "_hash",
        "body",
        "book",
        "book_name",
        "case_sensitive",
        "decorators",
        "entry",
        "extras",
        "groups",
        "index",
        "key",
        "primary",
        "recursion",
        "secondary",
        "source",
    )

    def __init__(
        self, index: int, entry: LoreEntry, book: Lorebook, source: str, case_sensitive: bool,
        primary: tuple[KeyRef, ...], secondary: tuple[KeyRef, ...],
    ) -> None:
        self.index = index
        self.entry = entry
        self.book = book
        self.book_name = book.name
        self.source = source
        self.key = f"{book.name}.{entry.uid}"
        self.decorators, self.body = parse_decorators(entry.content)
        self.primary = primary
        self.secondary = secondary
        self.groups = split_groups(entry.group)
        self.case_sensitive = case_sensitive
        self.extras = tuple(i for i, (flag, _) in enumerate(EXTRA_KINDS) if getattr(entry, flag))
        self.recursion = book.recursive_scanning
        self._hash: str | None = None

    @property
    def hash(self) -> str:
        """Content hash of this entry version (timed-effect records refer to it)."""
        if self._hash is None:
            self._hash = _digest(_dumps([self.book_name, self.entry]))
        return self._hash


@dataclass
class CompiledLore:
    entries: list[ScanEntry]
    matcher: KeyMatcher
    primary_users: dict[int, list[int]]
    always: list[int]
    with_delay: list[int]
    by_key: dict[str, int]
    delay_levels: list[int]
    max_own_depth: int
    max_book_depth: int | None
    any_book_recursive: bool = False
    problems: list[dict[str, Any]] = field(default_factory=list)
    books: list[dict[str, Any]] = field(default_factory=list)
    build_ms: float = 0.0
    _by_hash: dict[str, int] | None = None

    def find_hash(self, digest: str) -> int | None:
        """The entry index with this content hash (the map is built on first use)."""
        if self._by_hash is None:
            table: dict[str, int] = {}
            for item in self.entries:
                table.setdefault(item.hash, item.index)
            self._by_hash = table
        return self._by_hash.get(digest)


_CACHE: OrderedDict[tuple[Any, ...], CompiledLore] = OrderedDict()
_CACHE_SIZE = 16
_LOCK = threading.Lock()
_FINGERPRINTS: dict[int, tuple[weakref.ref[Lorebook], str]] = {}


def _dumps(obj: object) -> bytes:
    try:
        return orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:
        return repr(obj).encode("utf-8", "surrogatepass")


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=12).hexdigest()


def book_fingerprint(book: Lorebook) -> str:
    """Content hash of a book, remembered per book object."""
    ident = id(book)
    with _LOCK:
        known = _FINGERPRINTS.get(ident)
        if known is not None and known[0]() is book:
            return known[1]
    fp = _digest(_dumps(book))
    with _LOCK:
        _FINGERPRINTS[ident] = (weakref.ref(book, lambda _r, i=ident: _FINGERPRINTS.pop(i, None)), fp)
    return fp


def merge(books: Sequence[SourcedBook], strategy: CharacterStrategy) -> tuple[
    list[tuple[Lorebook, str]], list[dict[str, Any]]
]:
    """Deduplicate books by name per SillyTavern's rules; returns (kept books, notes)."""
    by_source: dict[str, list[Lorebook]] = {"chat": [], "persona": [], "global": [], "character": []}
    seen: dict[str, set[str]] = {k: set() for k in by_source}
    for sb in books:
        if sb.book.name in seen[sb.source]:
            continue
        seen[sb.source].add(sb.book.name)
        by_source[sb.source].append(sb.book)
    notes: list[dict[str, Any]] = []

    def keep(source: str, skip_if: set[str]) -> list[Lorebook]:
        kept = []
        for book in by_source[source]:
            if book.name in skip_if:
                notes.append({"book": book.name, "source": source, "skipped": "already loaded"})
            else:
                kept.append(book)
        return kept

    glob = by_source["global"]
    chat = keep("chat", seen["global"])
    persona = keep("persona", seen["global"] | {b.name for b in chat})
    character = keep("character", seen["global"] | {b.name for b in chat} | {b.name for b in persona})
    out = [(b, "chat") for b in chat] + [(b, "persona") for b in persona]
    if strategy is CharacterStrategy.GLOBAL_FIRST:
        out += [(b, "global") for b in glob] + [(b, "character") for b in character]
    else:
        out += [(b, "character") for b in character] + [(b, "global") for b in glob]
    return out, notes


def _ordered(merged: list[tuple[Lorebook, str]], strategy: CharacterStrategy) -> list[
    tuple[Lorebook, str, LoreEntry]
]:
    def block(sources: tuple[str, ...]) -> list[tuple[Lorebook, str, LoreEntry]]:
        items = [
            (book, source, entry)
            for book, source in merged if source in sources
            for entry in sorted(book.entries, key=lambda e: e.uid)
        ]
        items.sort(key=lambda t: -t[2].order)
        return items

    head = block(("chat",)) + block(("persona",))
    if strategy is CharacterStrategy.EVENLY:
        return head + block(("global", "character"))
    if strategy is CharacterStrategy.GLOBAL_FIRST:
        return head + block(("global",)) + block(("character",))
    return head + block(("character",)) + block(("global",))


def compile_books(
    books: Sequence[SourcedBook], strategy: CharacterStrategy, case_sensitive: bool
) -> tuple[CompiledLore, bool]:
    """The compiled form of these books, from the cache when their content is unchanged."""
    merged, notes = merge(books, strategy)
    cache_key = (
        tuple((source, book.name, book_fingerprint(book)) for book, source in merged),
        strategy, case_sensitive,
    )
    with _LOCK:
        hit = _CACHE.get(cache_key)
        if hit is not None:
            _CACHE.move_to_end(cache_key)
            return hit, True
    was_enabled = gc.isenabled()
    gc.disable()  # the build allocates many small objects; collections would triple its time
    try:
        compiled = _build(merged, notes, strategy, case_sensitive)
    finally:
        if was_enabled:
            gc.enable()
    with _LOCK:
        _CACHE[cache_key] = compiled
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return compiled, False


def clear_cache() -> None:
    with _LOCK:
        _CACHE.clear()


class _Builder:
    def __init__(self, global_cs: bool) -> None:
        self.global_cs = global_cs
        self.matcher = KeyMatcher()
        self.problems: list[dict[str, Any]] = []

    def ref(self, raw: str, cs: bool, book: Lorebook, entry: LoreEntry) -> KeyRef:
        if "{{" in raw or ("<" in raw and _LEGACY_MACRO.search(raw)):
            return KeyRef(raw, DYNAMIC)
        text = raw.strip()
        if not text:
            return KeyRef(text, NEVER)
        if text[0] == "/":
            try:
                rk = compile_regex_key(text)
            except UnsupportedRegex as exc:
                self.problems.append(
                    {"book": book.name, "uid": entry.uid, "key": text, "error": str(exc)}
                )
                return KeyRef(text, NEVER)
            if rk is not None:
                return KeyRef(text, REGEX, self.matcher.add_regex(rk))
        return KeyRef(text, PLAIN, self.matcher.add_plain(text, cs), is_single_word(text))


def _build(
    merged: list[tuple[Lorebook, str]], notes: list[dict[str, Any]],
    strategy: CharacterStrategy, global_cs: bool,
) -> CompiledLore:
    started = time.perf_counter()
    builder = _Builder(global_cs)
    ref = builder.ref
    entries: list[ScanEntry] = []
    primary_users: dict[int, list[int]] = {}
    always: list[int] = []
    with_delay: list[int] = []
    by_key: dict[str, int] = {}
    levels: set[int] = set()
    max_own = 0
    book_depths = [b.scan_depth for b, _ in merged if b.scan_depth is not None]

    for index, (book, source, entry) in enumerate(_ordered(merged, strategy)):
        cs = global_cs if entry.case_sensitive is None else entry.case_sensitive
        primary = tuple([ref(k, cs, book, entry) for k in entry.keys])
        secondary = tuple([ref(k, cs, book, entry) for k in entry.secondary_keys])
        item = ScanEntry(index, entry, book, source, cs, primary, secondary)
        entries.append(item)
        by_key.setdefault(item.key, index)
        dynamic = False
        for kr in primary:
            if kr.kind == PLAIN or kr.kind == REGEX:
                users = primary_users.get(kr.pid)
                if users is None:
                    primary_users[kr.pid] = [index]
                elif users[-1] != index:
                    users.append(index)
            elif kr.kind == DYNAMIC:
                dynamic = True
        if entry.constant or dynamic or "@@activate" in item.decorators:
            always.append(index)
        if entry.delay:
            with_delay.append(index)
        if entry.delay_level:
            levels.add(entry.delay_level)
        if entry.scan_depth is not None:
            max_own = max(max_own, min(entry.scan_depth, MAX_SCAN_DEPTH))

    problems = builder.problems
    for problem in builder.matcher.build():
        problems.append({"book": None, "uid": None, "key": None, "error": problem})
    info = [{"book": b.name, "source": s, "entries": len(b.entries)} for b, s in merged]
    return CompiledLore(
        entries=entries, matcher=builder.matcher, primary_users=primary_users, always=always,
        with_delay=with_delay, by_key=by_key, delay_levels=sorted(levels),
        max_own_depth=max_own, max_book_depth=max(book_depths) if book_depths else None,
        any_book_recursive=any(b.recursive_scanning for b, _ in merged),
        problems=problems, books=info + notes,
        build_ms=(time.perf_counter() - started) * 1000,
    )
