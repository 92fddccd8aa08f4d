"""Small builders for lorebook scan tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evacore.lore import (
    Lorebook,
    LoreEntry,
    ScanMessage,
    ScanResult,
    SourcedBook,
    TimedState,
    WorldInfoSettings,
    scan,
)


def entry(uid: int, keys: Sequence[str] = (), content: str | None = None, **kw: Any) -> LoreEntry:
    return LoreEntry(uid=uid, keys=tuple(keys), content=f"E{uid}" if content is None else content, **kw)


def book(*entries: LoreEntry, name: str = "B", **kw: Any) -> Lorebook:
    return Lorebook(name=name, entries=entries, **kw)


def chat(*texts: str) -> list[ScanMessage]:
    """Messages oldest first, alternating User / Eva, the last one being answered."""
    n = len(texts)
    out = []
    for i, text in enumerate(texts):
        is_user = (n - 1 - i) % 2 == 0
        out.append(ScanMessage(name="User" if is_user else "Eva", text=text, is_user=is_user))
    return out


def words(text: str) -> int:
    return len(text.split())


def run(
    books: Lorebook | SourcedBook | Sequence[Lorebook | SourcedBook],
    messages: Sequence[ScanMessage] | str,
    *,
    settings: WorldInfoSettings | None = None,
    state: TimedState | None = None,
    seed: int = 0,
    turn: int | None = None,
    max_context: int = 100_000,
    **kw: Any,
) -> ScanResult:
    if isinstance(books, (Lorebook, SourcedBook)):
        books = [books]
    sourced = [b if isinstance(b, SourcedBook) else SourcedBook(b, "global") for b in books]
    if isinstance(messages, str):
        messages = chat(messages)
    return scan(
        sourced, messages, settings or WorldInfoSettings(), state or TimedState(),
        seed=seed, turn=len(messages) if turn is None else turn, max_context=max_context,
        count_tokens=kw.pop("count_tokens", words), **kw,
    )


def uids(result: ScanResult) -> list[int]:
    return [a.uid for a in result.activated]


def cuts(result: ScanResult) -> dict[int, str]:
    return {c.uid: c.reason for c in result.cut}
