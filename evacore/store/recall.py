"""A short-lived, per-database memory of the small reads every tour repeats (settings, the
lorebooks linked to a chat, its memory blocks, whether it has documents, the facade's model
names).

Must not: hold anything a caller may change, or answer from memory after a write to the
same tables in this process: every session's writes are watched (ORM flushes and bulk
statements alike), the tables' topics are forgotten at once and again when the write
commits or rolls back, and a session that wrote reads the database itself. Writes made by
another process are seen within `REMEMBER_SECONDS`.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Awaitable, Callable, Hashable, Iterable
from itertools import chain
from typing import Any, TypeVar

from sqlalchemy import event
from sqlalchemy.orm import Session

T = TypeVar("T")
REMEMBER_SECONDS = 2.0
KEPT_AT_MOST = 4096
"""Entries one database's memory holds before the expired ones are swept out: most keys
name one chat (its lorebook links, its memory blocks), and a server meets new chats all its
life, so what has expired must not stay until a write forgets its topic."""
TOPICS: dict[str, str] = {
    "settings": "settings",
    "lorebooks": "lore", "lore_entries": "lore", "lorebook_links": "lore",
    "memory_blocks": "memory_blocks",
    "retrieval_documents": "documents",
    "characters": "models", "connections": "models",
}
_WRITTEN = "evacore_recall_written"
_now = time.monotonic
_memories: weakref.WeakKeyDictionary[Any, dict[tuple[str, Hashable], tuple[float, Any]]] = \
    weakref.WeakKeyDictionary()


def _memory(session: Any) -> dict[tuple[str, Hashable], tuple[float, Any]] | None:
    bind = session.get_bind()
    engine = getattr(bind, "engine", bind)
    try:
        memory = _memories.get(engine)
        if memory is None:
            memory = _memories[engine] = {}
    except TypeError:  # not weak-referenceable: no memory
        return None
    return memory


async def recall(session: Any, topic: str, key: Hashable,
                 load: Callable[[], Awaitable[T]]) -> T:
    """`load()`'s result, from memory when this database answered it lately."""
    written = session.info.get(_WRITTEN)
    if written:  # this session changed something: it reads what it wrote
        return await load()
    memory = _memory(session)
    now = _now()
    hit = memory.get((topic, key)) if memory is not None else None
    if hit is not None and hit[0] > now:
        return hit[1]  # type: ignore[no-any-return]
    value = await load()
    # the load's autoflush may have written this session's pending changes: then the value
    # is this session's own view, not the database's, and is not remembered
    if memory is not None and not session.info.get(_WRITTEN):
        if len(memory) >= KEPT_AT_MOST:
            _sweep(memory, now)
        memory[(topic, key)] = (now + REMEMBER_SECONDS, value)
    return value


def _sweep(memory: dict[tuple[str, Hashable], tuple[float, Any]], now: float) -> None:
    """Drop the expired entries; all of them when half or more are still fresh (more keys
    were read within `REMEMBER_SECONDS` than it holds), so a sweep is not made at every read."""
    for entry in [k for k, (until, _) in memory.items() if until <= now]:
        del memory[entry]
    if len(memory) >= KEPT_AT_MOST // 2:
        memory.clear()


def forget(session: Any, topic: str) -> None:
    """Drop what this database's memory holds of `topic`: the next read asks the database."""
    _forget(session, (topic,))


def _forget(session: Any, topics: Iterable[str]) -> None:
    memory = _memory(session)
    topics = set(topics)
    if memory and topics:
        for entry in [k for k in memory if k[0] in topics]:
            memory.pop(entry, None)


def _mark(session: Session, tables: Iterable[str | None]) -> None:
    topics = {TOPICS[t] for t in tables if t in TOPICS}
    if topics:
        session.info.setdefault(_WRITTEN, set()).update(topics)
        _forget(session, topics)


@event.listens_for(Session, "after_flush")
def _flushed(session: Session, _context: Any) -> None:
    objects = chain(session.new, session.dirty, session.deleted)
    _mark(session, {getattr(getattr(o, "__table__", None), "name", None) for o in objects})


@event.listens_for(Session, "do_orm_execute")
def _executed(state: Any) -> None:
    if state.is_insert or state.is_update or state.is_delete:
        _mark(state.session, [getattr(getattr(state.statement, "table", None), "name", None)])


@event.listens_for(Session, "after_commit")
@event.listens_for(Session, "after_rollback")
def _ended(session: Session) -> None:
    written = session.info.pop(_WRITTEN, None)
    if written:
        _forget(session, written)
