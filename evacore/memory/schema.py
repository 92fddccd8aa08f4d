"""The retrieval index's tables as the memory package names them (documents, chunks; they
are defined with every other table in `store/tables.py`, migration 0002), and its keys.

Must not: create tables (the migration does) or hold queries. Full-text structures live
beside these tables and differ by database: an FTS5 table kept in sync by triggers on
SQLite, a generated `tsv` column with a GIN index on PostgreSQL (see lexical.py).
"""

from __future__ import annotations

import hashlib
from functools import lru_cache

from evacore.store.tables import retrieval_chunks as chunks
from evacore.store.tables import retrieval_documents as documents

__all__ = ["SOURCE_DOCUMENT", "SOURCE_MESSAGE", "chunks", "documents", "scope_key", "text_hash"]

SOURCE_MESSAGE = "message"
SOURCE_DOCUMENT = "document"


@lru_cache(maxsize=4096)
def scope_key(source_kind: str, scope_kind: str, scope_id: str = "") -> str:
    """One alphanumeric word naming what a chunk belongs to (a chat's messages, the documents
    of a chat, of a character, or global documents); searches filter on a set of these."""
    digest = hashlib.sha1(f"{source_kind}:{scope_kind}:{scope_id}".encode()).hexdigest()[:24]
    return f"k{digest}"


def text_hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
