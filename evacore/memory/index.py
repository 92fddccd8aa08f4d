"""Writing the retrieval index: chat messages (as they are saved, and lazily for imported
chats) and data-bank documents, as chunks with their full-text entries.

Must not: search or rank (lexical.py, vectors.py, ranking.py), or embed (the embedding
worker fills vectors later). A message is re-indexed only when its text changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import Insert, Select, and_, bindparam, delete, insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from evacore.domain.ids import new_id, utcnow
from evacore.memory._terms import words
from evacore.memory.chunking import chunk_text
from evacore.memory.options import RetrievalOptions
from evacore.memory.schema import (
    SOURCE_DOCUMENT,
    SOURCE_MESSAGE,
    chunks,
    documents,
    scope_key,
    text_hash,
)
from evacore.store import direct
from evacore.store.tables import Message, Variant


@dataclass(frozen=True, slots=True)
class IndexedMessage:
    """What the index needs of a message (the active variant's text for an answer)."""

    id: str
    position: int
    role: str
    name: str | None
    content: str
    hidden: bool = False
    created_at: datetime | None = None


def message_key(chat_id: str) -> str:
    return scope_key(SOURCE_MESSAGE, "chat", chat_id)


def document_key(scope_kind: str, scope_id: str = "") -> str:
    return scope_key(SOURCE_DOCUMENT, scope_kind, scope_id)


def chat_keys(chat_id: str, character_id: str | None, *, messages: bool = True,
              documents: bool = True) -> list[str]:
    """The scope keys a chat searches: its messages, and the global, its own and its
    character's documents."""
    keys = [message_key(chat_id)] if messages else []
    if documents:
        keys += [document_key("global"), document_key("chat", chat_id)]
        if character_id:
            keys.append(document_key("character", character_id))
    return keys


@cache
def _any_chunk_statement(keys: int) -> Select[Any]:
    """Built once per number of scope keys, each its own parameter (no expanding IN): the
    check runs without statement construction, on SQLite in one direct trip."""
    return (select(chunks.c.id)
            .where(chunks.c.scope_key.in_([bindparam(f"p_key_{i}") for i in range(keys)]))
            .limit(1))


async def any_chunk(s: AsyncSession, keys: list[str]) -> bool:
    """Whether anything is indexed under one of these scope keys (one indexed lookup)."""
    if not keys:
        return False
    rows = await direct.execute(s, _any_chunk_statement(len(keys)),
                                {f"p_key_{i}": key for i, key in enumerate(keys)})
    return bool(rows)


async def load_messages(s: AsyncSession, chat_id: str, *, ids: list[str] | None = None,
                        from_position: int | None = None, newest: int | None = None,
                        limit: int = 500) -> list[IndexedMessage]:
    """Messages with their active text: by id, from a position upwards, or the newest N."""
    stmt = (select(Message, Variant.content)
            .outerjoin(Variant, Variant.id == Message.active_variant_id)
            .where(Message.chat_id == chat_id))
    if ids is not None:
        stmt = stmt.where(Message.id.in_(ids))
    if from_position is not None:
        stmt = stmt.where(Message.position >= from_position).order_by(Message.position)
    elif newest is not None:
        stmt = stmt.order_by(Message.position.desc())
        limit = newest
    rows = (await s.execute(stmt.limit(limit))).all()
    return [_indexed(m, variant_text) for m, variant_text in rows]


def _indexed(m: Message, variant_text: str | None) -> IndexedMessage:
    return IndexedMessage(id=m.id, position=m.position, role=m.role, name=m.name,
                          content=(variant_text if m.active_variant_id else m.content) or "",
                          hidden=bool(m.hidden), created_at=m.created_at)


_INSERT_CHUNK = insert(chunks)
_ONE_BY_ONE = 8
"""Up to this many chunk rows are inserted one statement each on the direct path; more (a
backfill, a document) go as one `executemany`."""


async def index_messages(s: AsyncSession, chat_id: str, messages: list[IndexedMessage], *,
                         chunk_chars: int = 1200, overlap: int = 200,
                         stored: dict[str, str] | None = None) -> int:
    """Bring the chunks of these messages up to date; returns how many messages were
    (re)indexed. Hidden and empty messages lose their chunks. `stored`: the indexed text
    hash of each message that has chunks, when the caller read it already."""
    if not messages:
        return 0
    if stored is None:
        stored = dict((await s.execute(
            select(chunks.c.message_id, chunks.c.text_hash)
            .where(chunks.c.message_id.in_([m.id for m in messages]), chunks.c.part == 0)
        )).all())
    key = message_key(chat_id)
    rows: list[dict[str, Any]] = []
    stale: list[str] = []
    changed = 0
    for m in messages:
        wanted = "" if m.hidden else m.content.strip()
        digest = text_hash(wanted) if wanted else None
        if stored.get(m.id) == digest:
            continue
        changed += 1
        if m.id in stored:
            stale.append(m.id)
        if not wanted:
            continue
        for part, piece in enumerate(chunk_text(wanted, chunk_chars, overlap)):
            rows.append(_chunk_row(
                source_kind=SOURCE_MESSAGE, scope_key=key, chat_id=chat_id, message_id=m.id,
                position=m.position, part=part, label=m.name or m.role, text=piece,
                text_hash=digest or "", created_at=m.created_at,
            ))
    if stale:
        await s.execute(delete(chunks).where(chunks.c.message_id.in_(stale)))
    if len(rows) > _ONE_BY_ONE:
        await s.execute(_INSERT_CHUNK, rows)
    elif len(rows) == 1:  # a pre-built statement on the driver
        await direct.execute(s, _INSERT_CHUNK, rows[0])
    elif rows:  # a tour's save: its input and answer in one pre-built statement
        await direct.execute(s, _insert_chunks(len(rows), tuple(rows[0])), {
            f"{name}_{i}": value for i, row in enumerate(rows) for name, value in row.items()})
    return changed


@cache
def _insert_chunks(count: int, fields: tuple[str, ...]) -> Insert:
    """Built once per row count and fields (`_chunk_row`'s): one statement inserting `count`
    chunk rows, the fields of row i named `<field>_<i>`."""
    return insert(chunks).values([
        {name: bindparam(f"{name}_{i}", type_=chunks.c[name].type) for name in fields}
        for i in range(count)])


@cache
def _recent_statement(newest: int) -> Select[Any]:
    """Built once: the save-time read costs no statement construction."""
    m, v = Message.__table__.c, Variant.__table__.c
    return (
        select(m.id, m.position, m.role, m.name, m.content, m.hidden, m.created_at,
               m.active_variant_id, v.content, chunks.c.text_hash)
        .select_from(Message.__table__
                     .outerjoin(Variant.__table__, v.id == m.active_variant_id)
                     .outerjoin(chunks, and_(chunks.c.message_id == m.id, chunks.c.part == 0)))
        .where(m.chat_id == bindparam("p_chat_id"))
        .order_by(m.position.desc())
        .limit(newest)
    )


async def index_recent(s: AsyncSession, chat_id: str, newest: int = 4, **chunking: int) -> int:
    """Index the newest messages of a chat (a tour's input and answer, a new variant):
    one query reads them with what the index holds of each."""
    rows = await direct.execute(s, _recent_statement(newest), {"p_chat_id": chat_id})
    stored = {r[0]: r[9] for r in rows if r[9] is not None}
    messages = [IndexedMessage(id=id_, position=position, role=role, name=name,
                               content=(variant_text if active else content) or "",
                               hidden=bool(hidden), created_at=created_at)
                for (id_, position, role, name, content, hidden, created_at, active,
                     variant_text, _) in rows]
    return await index_messages(s, chat_id, messages, stored=stored, **chunking)


async def backfill(s: AsyncSession, chat_id: str, from_position: int, limit: int,
                   **chunking: int) -> tuple[int, int]:
    """Index up to `limit` messages from `from_position` on (oldest first); returns the
    count indexed and the position to continue from next time."""
    done, position = 0, from_position
    while done < limit:
        batch = await load_messages(s, chat_id, from_position=position,
                                    limit=min(500, limit - done))
        if not batch:
            break
        await index_messages(s, chat_id, batch, **chunking)
        done += len(batch)
        position = batch[-1].position + 1
    return done, position


async def catch_up(s: AsyncSession, chat_id: str, state: dict[str, Any],
                   opts: RetrievalOptions) -> int:
    """`backfill` a chat's messages as its retrieval options say, from where the last one
    stopped (`state`: the chat's `state["retrieval"]`, moved on in place); returns the count
    walked (0 when messages are not searched)."""
    if not (opts.messages and opts.backfill_limit):
        return 0
    done, state["indexed_to"] = await backfill(
        s, chat_id, int(state.get("indexed_to") or 0), opts.backfill_limit,
        chunk_chars=opts.chunk_chars, overlap=opts.chunk_overlap)
    return done


def _chunk_row(**fields: Any) -> dict[str, Any]:
    fields["n_terms"] = len(words(fields["text"]))
    fields["created_at"] = fields.get("created_at") or utcnow()
    fields.setdefault("message_id", None)
    fields.setdefault("document_id", None)
    return fields


async def add_document(s: AsyncSession, *, name: str, content: str, scope_kind: str,
                       scope_id: str, media_type: str, size: int, sha256: str,
                       chunk_chars: int = 1200, overlap: int = 200) -> dict[str, Any]:
    """Store a document and its chunks; returns the document row as a dict."""
    doc_id = new_id()
    pieces = chunk_text(content, chunk_chars, overlap)
    now = utcnow()
    row = {
        "id": doc_id, "name": name, "scope_kind": scope_kind, "scope_id": scope_id,
        "chat_id": scope_id if scope_kind == "chat" else None, "media_type": media_type,
        "size": size, "sha256": sha256, "chunks": len(pieces), "created_at": now,
    }
    await s.execute(insert(documents), [row])
    key = document_key(scope_kind, scope_id)
    if pieces:
        await s.execute(insert(chunks), [
            _chunk_row(source_kind=SOURCE_DOCUMENT, scope_key=key, chat_id=row["chat_id"],
                       document_id=doc_id, position=i, part=0, label=name[:300], text=piece,
                       text_hash=text_hash(piece), created_at=now)
            for i, piece in enumerate(pieces)
        ])
    return row


async def list_documents(s: AsyncSession, scope_kind: str | None = None,
                         scope_id: str | None = None) -> list[dict[str, Any]]:
    stmt = select(documents).order_by(documents.c.created_at, documents.c.id)
    if scope_kind is not None:
        stmt = stmt.where(and_(documents.c.scope_kind == scope_kind,
                               documents.c.scope_id == (scope_id or "")))
    return [dict(r._mapping) for r in (await s.execute(stmt)).all()]


async def get_document(s: AsyncSession, document_id: str) -> dict[str, Any] | None:
    row = (await s.execute(select(documents).where(documents.c.id == document_id))).first()
    return dict(row._mapping) if row else None


async def delete_document(s: AsyncSession, document_id: str) -> bool:
    """Delete a document and its chunks; False when there was none."""
    await s.execute(delete(chunks).where(chunks.c.document_id == document_id))
    result = await s.execute(delete(documents).where(documents.c.id == document_id))
    return bool(result.rowcount)
