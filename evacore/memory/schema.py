"""SQLAlchemy Core tables of the retrieval index: documents and chunks (migration 0002).

Must not: create tables (the migration does) or hold queries. Full-text structures live
beside these tables and differ by database: an FTS5 table kept in sync by triggers on
SQLite, a generated `tsv` column with a GIN index on PostgreSQL (see lexical.py).
"""

from __future__ import annotations

import hashlib

from sqlalchemy import (
    Column,
    DateTime,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
)

metadata = MetaData()

documents = Table(
    "retrieval_documents", metadata,
    Column("id", String(32), primary_key=True),
    Column("name", String(300), nullable=False),
    Column("scope_kind", String(16), nullable=False),
    Column("scope_id", String(32), nullable=False),
    Column("chat_id", String(32), nullable=True),
    Column("media_type", String(100), nullable=False),
    Column("size", Integer, nullable=False),
    Column("sha256", String(64), nullable=False),
    Column("chunks", Integer, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

chunks = Table(
    "retrieval_chunks", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("source_kind", String(16), nullable=False),
    Column("scope_key", String(40), nullable=False),
    Column("chat_id", String(32), nullable=True),
    Column("message_id", String(32), nullable=True),
    Column("document_id", String(32), nullable=True),
    Column("position", Integer, nullable=False),
    Column("part", Integer, nullable=False),
    Column("label", String(300), nullable=False),
    Column("text", Text, nullable=False),
    Column("text_hash", String(32), nullable=False),
    Column("n_terms", Integer, nullable=False),
    Column("embedding", LargeBinary, nullable=True),
    Column("embedding_model", String(200), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

SOURCE_MESSAGE = "message"
SOURCE_DOCUMENT = "document"


def scope_key(source_kind: str, scope_kind: str, scope_id: str = "") -> str:
    """One alphanumeric word naming what a chunk belongs to (a chat's messages, the documents
    of a chat, of a character, or global documents); searches filter on a set of these."""
    digest = hashlib.sha1(f"{source_kind}:{scope_kind}:{scope_id}".encode()).hexdigest()[:24]
    return f"k{digest}"


def text_hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
