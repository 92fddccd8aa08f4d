"""Lexical search over the chunk table, one interface with two implementations chosen by the
database: SQLite FTS5 (BM25 rank) and PostgreSQL full-text (`simple` tsvector, ts_rank_cd).

Must not: score for the prompt (ranking.py rescores candidates identically on both
databases); it only finds candidates and reports term statistics (document frequencies).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import bindparam, text
from sqlalchemy.ext.asyncio import AsyncSession

from evacore.memory._terms import Term

_TTL = 30.0
_CACHE_CAP = 20_000
_COMMON_SHARE = 0.1
"""A term found in more than this share of chunks is left out of the candidate query
(it still counts when candidates are rescored): common words make full-text search slow."""


@dataclass(frozen=True, slots=True)
class IndexStats:
    chunks: int
    avg_terms: float


class LexicalIndex(Protocol):
    dialect: str

    async def candidates(self, s: AsyncSession, terms: list[Term], keys: list[str],
                         limit: int) -> list[int]:
        """Chunk ids in the given scopes matching any term, best first."""

    async def doc_freqs(self, s: AsyncSession, terms: list[Term]) -> dict[str, int]:
        """Per term text, the number of chunks containing it (over the whole index)."""

    async def stats(self, s: AsyncSession) -> IndexStats: ...


class _Cached:
    """Term statistics change slowly: document frequencies and totals are cached briefly."""

    def __init__(self) -> None:
        self._df: dict[tuple[str, bool], tuple[int, float]] = {}
        self._stats: tuple[IndexStats, float] | None = None

    async def stats(self, s: AsyncSession) -> IndexStats:
        now = time.monotonic()
        if self._stats is not None and self._stats[1] > now:
            return self._stats[0]
        row = (await s.execute(text(
            "SELECT count(*), coalesce(avg(n_terms), 0) FROM retrieval_chunks"))).one()
        stats = IndexStats(int(row[0]), float(row[1]))
        self._stats = (stats, now + _TTL)
        return stats

    async def doc_freqs(self, s: AsyncSession, terms: list[Term]) -> dict[str, int]:
        now = time.monotonic()
        out: dict[str, int] = {}
        for term in terms:
            key = (term.text, term.prefix)
            hit = self._df.get(key)
            if hit is None or hit[1] <= now:
                if len(self._df) >= _CACHE_CAP:
                    self._df.clear()
                hit = (await self._count(s, term), now + _TTL)
                self._df[key] = hit
            out[term.text] = hit[0]
        return out

    def forget(self) -> None:
        """Drop cached statistics (after a large change such as a document upload)."""
        self._df.clear()
        self._stats = None

    async def _count(self, s: AsyncSession, term: Term) -> int:
        raise NotImplementedError

    async def _searchable(self, s: AsyncSession, terms: list[Term]) -> list[Term]:
        """The terms worth asking the index for: not the very common ones (but at least
        the two rarest, so a query of common words still finds something)."""
        stats = await self.stats(s)
        freqs = await self.doc_freqs(s, terms)
        cap = max(1000, int(stats.chunks * _COMMON_SHARE))
        kept = [t for t in terms if 0 < freqs[t.text] <= cap]
        if not kept:
            present = sorted((t for t in terms if freqs[t.text] > 0), key=lambda t: freqs[t.text])
            kept = present[:2]
        return kept


def _fts5_word(term: Term) -> str:
    return f'"{term.text}"' + ("*" if term.prefix else "")


class SqliteFts(_Cached):
    """FTS5 table `retrieval_fts` (text, scope_key) with BM25 ranking on the text column."""

    dialect = "sqlite"

    async def _count(self, s: AsyncSession, term: Term) -> int:
        if term.prefix:
            sql = ("SELECT coalesce(sum(doc), 0) FROM retrieval_fts_terms "
                   "WHERE term >= :lo AND term < :hi")
            params = {"lo": term.text, "hi": term.text + "\U0010ffff"}
        else:
            sql = "SELECT coalesce(sum(doc), 0) FROM retrieval_fts_terms WHERE term = :lo"
            params = {"lo": term.text}
        return int((await s.execute(text(sql), params)).scalar() or 0)

    async def candidates(self, s: AsyncSession, terms: list[Term], keys: list[str],
                         limit: int) -> list[int]:
        if not terms or not keys:
            return []
        searched = await self._searchable(s, terms)
        if not searched:
            return []
        scopes = " OR ".join(f'"{k}"' for k in keys)
        words = " OR ".join(_fts5_word(t) for t in searched)
        match = f"scope_key : ({scopes}) AND text : ({words})"
        rows = await s.execute(
            text("SELECT rowid FROM retrieval_fts WHERE retrieval_fts MATCH :q "
                 "ORDER BY rank LIMIT :n"),
            {"q": match, "n": limit},
        )
        return [int(r[0]) for r in rows]


def _ts_word(term: Term) -> str:
    return f"'{term.text}'" + (":*" if term.prefix else "")


class PostgresFts(_Cached):
    """The generated `tsv` column (`simple` configuration) with a GIN index."""

    dialect = "postgresql"

    async def _count(self, s: AsyncSession, term: Term) -> int:
        sql = "SELECT count(*) FROM retrieval_chunks WHERE tsv @@ to_tsquery('simple', :q)"
        return int((await s.execute(text(sql), {"q": _ts_word(term)})).scalar() or 0)

    async def candidates(self, s: AsyncSession, terms: list[Term], keys: list[str],
                         limit: int) -> list[int]:
        if not terms or not keys:
            return []
        searched = await self._searchable(s, terms)
        if not searched:
            return []
        query = " | ".join(_ts_word(t) for t in searched)
        stmt = text(
            "SELECT id FROM retrieval_chunks, to_tsquery('simple', :q) AS q "
            "WHERE scope_key IN :keys AND tsv @@ q "
            "ORDER BY ts_rank_cd(tsv, q) DESC, id DESC LIMIT :n"
        ).bindparams(bindparam("keys", expanding=True))
        rows = await s.execute(stmt, {"q": query, "keys": list(keys), "n": limit})
        return [int(r[0]) for r in rows]


def lexical_for(dialect: str) -> SqliteFts | PostgresFts:
    """The implementation for a database dialect name (`sqlite` or `postgresql`)."""
    if dialect == "sqlite":
        return SqliteFts()
    if dialect == "postgresql":
        return PostgresFts()
    raise ValueError(f"no lexical index for the {dialect} database")
