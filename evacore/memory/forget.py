"""What memory keeps about a chat or a character leaves with it: its memory blocks and its
data-bank documents with their chunks. Called in the transaction that deletes the record.
(A deleted message's or chat's retrieval chunks go by the database's own cascade.)

Must not: delete anything of another scope; user-scoped and global memory stay.
"""

from __future__ import annotations

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from evacore.memory.schema import chunks, documents
from evacore.store.tables import MemoryBlock


async def forget_scope(s: AsyncSession, scope_kind: str, scope_id: str) -> None:
    """A chat's or character's memory blocks and documents (with their chunks)."""
    await s.execute(delete(MemoryBlock).where(MemoryBlock.scope_kind == scope_kind,
                                              MemoryBlock.scope_id == scope_id))
    doc_ids = list((await s.execute(select(documents.c.id).where(
        documents.c.scope_kind == scope_kind, documents.c.scope_id == scope_id))).scalars())
    if doc_ids:
        await s.execute(delete(chunks).where(chunks.c.document_id.in_(doc_ids)))
        await s.execute(delete(documents).where(documents.c.id.in_(doc_ids)))
