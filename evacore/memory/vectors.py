"""Vector search in-process: chunk vectors stored as float32 bytes in the chunk table, one
matrix per searched scope set cached in memory and reloaded when the rows change.

Must not: compute embeddings (embeddings.py) or decide the final score (ranking.py).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
from sqlalchemy import and_, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from evacore.memory.schema import chunks

_MAX_CACHED = 32


@dataclass
class _Matrix:
    signature: tuple[int, int, int]
    ids: np.ndarray
    rows: np.ndarray


def to_bytes(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


class VectorCache:
    """Per (scope keys, model), the ids and unit vectors of the embedded chunks."""

    def __init__(self) -> None:
        self._cache: OrderedDict[tuple[tuple[str, ...], str], _Matrix] = OrderedDict()

    async def matrix(self, s: AsyncSession, keys: list[str], model: str
                     ) -> tuple[np.ndarray, np.ndarray]:
        scope = and_(chunks.c.scope_key.in_(keys), chunks.c.embedding_model == model)
        row = (await s.execute(select(
            func.count(), func.coalesce(func.max(chunks.c.id), 0),
            func.coalesce(func.sum(chunks.c.id), 0),
        ).where(scope))).one()
        signature = (int(row[0]), int(row[1]), int(row[2]))
        cache_key = (tuple(sorted(keys)), model)
        cached = self._cache.get(cache_key)
        if cached is None or cached.signature != signature:
            result = (await s.execute(
                select(chunks.c.id, chunks.c.embedding).where(scope).order_by(chunks.c.id)
            )).all()
            ids = np.fromiter((r[0] for r in result), dtype=np.int64, count=len(result))
            rows = (np.stack([np.frombuffer(r[1], dtype="<f4") for r in result])
                    if result else np.zeros((0, 1), dtype=np.float32))
            cached = _Matrix(signature, ids, rows)
            self._cache[cache_key] = cached
            if len(self._cache) > _MAX_CACHED:
                self._cache.popitem(last=False)
        self._cache.move_to_end(cache_key)
        return cached.ids, cached.rows

    async def search(self, s: AsyncSession, keys: list[str], model: str, query: np.ndarray,
                     limit: int) -> dict[int, float]:
        """The `limit` most similar chunks: chunk id → cosine similarity."""
        ids, rows = await self.matrix(s, keys, model)
        if not len(ids) or rows.shape[1] != query.shape[0]:
            return {}
        sims = rows @ query.astype(np.float32)
        if len(ids) > limit:
            top = np.argpartition(-sims, limit - 1)[:limit]
        else:
            top = np.arange(len(ids))
        return {int(ids[i]): float(sims[i]) for i in top}

    async def cosines(self, s: AsyncSession, keys: list[str], model: str, query: np.ndarray,
                      chunk_ids: list[int]) -> dict[int, float]:
        """Similarity of given chunks (those with a vector) to the query."""
        ids, rows = await self.matrix(s, keys, model)
        if not len(ids) or rows.shape[1] != query.shape[0]:
            return {}
        where = np.searchsorted(ids, chunk_ids)
        out: dict[int, float] = {}
        for chunk_id, i in zip(chunk_ids, where, strict=True):
            if i < len(ids) and ids[i] == chunk_id:
                out[chunk_id] = float(rows[i] @ query)
        return out


async def pending(s: AsyncSession, model: str, limit: int) -> list[tuple[int, str]]:
    """Chunks without a vector of this model, newest first: (id, text)."""
    rows = await s.execute(
        select(chunks.c.id, chunks.c.text)
        .where(or_(chunks.c.embedding_model.is_(None), chunks.c.embedding_model != model))
        .order_by(chunks.c.id.desc()).limit(limit)
    )
    return [(int(r[0]), r[1]) for r in rows]


async def store(s: AsyncSession, model: str, ids: list[int], vectors: np.ndarray) -> None:
    for chunk_id, vector in zip(ids, vectors, strict=True):
        await s.execute(update(chunks).where(chunks.c.id == chunk_id)
                        .values(embedding=to_bytes(vector), embedding_model=model))
