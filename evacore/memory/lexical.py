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
_COMMON_SHARE = 0.03
_COMMON_FLOOR = 500
"""A term found in more than this share of chunks (and more than the floor) is left out of
the candidate query; it still counts when candidates are rescored. Common words make
full-text search slow and add little to the ranking."""
_WIDE_SCOPE = 0.5
"""When the searched scopes hold at least this share of all chunks, SQLite searches the
whole index and filters by scope afterwards (cheaper than the scope column filter)."""


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
    """Term statistics change slowly: document frequencies and totals are cached briefly
    (a term's absence is not: it is asked again)."""

    def __init__(self) -> None:
        self._df: dict[tuple[str, bool], tuple[int, float]] = {}
        self._stats: tuple[IndexStats, float] | None = None
        self._scopes: tuple[dict[str, int], float] | None = None

    async def scope_sizes(self, s: AsyncSession) -> dict[str, int]:
        """Chunks per scope key (cached briefly)."""
        now = time.monotonic()
        if self._scopes is not None and self._scopes[1] > now:
            return self._scopes[0]
        rows = await s.execute(text(
            "SELECT scope_key, count(*) FROM retrieval_chunks GROUP BY scope_key"))
        sizes = {str(k): int(n) for k, n in rows}
        self._scopes = (sizes, now + _TTL)
        return sizes

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
        # a term the index did not hold is asked again: chunks may have come since (a
        # backfill right before this search), and a search for it must find them
        missing = [t for t in terms if (hit := self._df.get((t.text, t.prefix))) is None
                   or hit[1] <= now or not hit[0]]
        if missing:
            if len(self._df) + len(missing) >= _CACHE_CAP:
                self._df.clear()
            for term, count in zip(missing, await self._counts(s, missing), strict=True):
                self._df[(term.text, term.prefix)] = (count, now + _TTL)
        return {t.text: self._df[(t.text, t.prefix)][0] for t in terms}

    def forget(self) -> None:
        """Drop cached statistics (after a large change such as a document upload)."""
        self._df.clear()
        self._stats = None
        self._scopes = None

    async def _counts(self, s: AsyncSession, terms: list[Term]) -> list[int]:
        """Document frequencies of the terms, in one statement."""
        raise NotImplementedError

    async def _searchable(self, s: AsyncSession, terms: list[Term]) -> list[Term]:
        """The terms worth asking the index for: not the very common ones (but at least
        the two rarest, so a query of common words still finds something)."""
        stats = await self.stats(s)
        freqs = await self.doc_freqs(s, terms)
        cap = max(_COMMON_FLOOR, int(stats.chunks * _COMMON_SHARE))
        kept = [t for t in terms if 0 < freqs[t.text] <= cap]
        if not kept:
            present = sorted((t for t in terms if freqs[t.text] > 0), key=lambda t: freqs[t.text])
            kept = present[:2]
        return kept


def _fts5_word(term: Term) -> str:
    return f'"{term.text}"' + ("*" if term.prefix else "")


_MATCH = text("SELECT rowid FROM retrieval_fts WHERE retrieval_fts MATCH :q "
              "ORDER BY rank LIMIT :n")


class SqliteFts(_Cached):
    """FTS5 table `retrieval_fts` (text, scope_key) with BM25 ranking on the text column."""

    dialect = "sqlite"

    async def _counts(self, s: AsyncSession, terms: list[Term]) -> list[int]:
        parts, params = [], {}
        for i, term in enumerate(terms):
            params[f"lo{i}"] = term.text
            if term.prefix:
                params[f"hi{i}"] = term.text + "\U0010ffff"
                where = f"term >= :lo{i} AND term < :hi{i}"
            else:
                where = f"term = :lo{i}"
            parts.append(f"SELECT {i}, coalesce(sum(doc), 0) FROM retrieval_fts_terms "
                         f"WHERE {where}")
        rows = dict((await s.execute(text(" UNION ALL ".join(parts)), params)).all())
        return [int(rows.get(i) or 0) for i in range(len(terms))]

    async def candidates(self, s: AsyncSession, terms: list[Term], keys: list[str],
                         limit: int) -> list[int]:
        if not terms or not keys:
            return []
        searched = await self._searchable(s, terms)
        if not searched:
            return []
        words = " OR ".join(_fts5_word(t) for t in searched)
        stats = await self.stats(s)
        sizes = await self.scope_sizes(s)
        in_scope = sum(sizes.get(k, 0) for k in keys)
        if stats.chunks and in_scope >= _WIDE_SCOPE * stats.chunks:
            ids = await self._wide(s, words, keys, limit)
            if ids is not None:
                return ids
        scopes = " OR ".join(f'"{k}"' for k in keys)
        rows = await s.execute(_MATCH, {"q": f"scope_key : ({scopes}) AND text : ({words})",
                                        "n": limit})
        return [int(r[0]) for r in rows]

    async def _wide(self, s: AsyncSession, words: str, keys: list[str],
                    limit: int) -> list[int] | None:
        """Search everything, keep the rows of the scopes; None when too few are left."""
        found = [int(r[0]) for r in await s.execute(
            _MATCH, {"q": f"text : ({words})", "n": limit + limit // 2})]
        if not found:
            return []
        # by primary key only: a scope condition here makes SQLite walk the scope index
        stmt = text("SELECT id, scope_key FROM retrieval_chunks WHERE id IN :ids"
                    ).bindparams(bindparam("ids", expanding=True))
        wanted = set(keys)
        kept = {int(i) for i, k in await s.execute(stmt, {"ids": found}) if k in wanted}
        if len(kept) < min(limit, len(found)) // 2:
            return None
        return [i for i in found if i in kept][:limit]


def _ts_word(term: Term) -> str:
    return f"'{term.text}'" + (":*" if term.prefix else "")


class PostgresFts(_Cached):
    """The generated `tsv` column (`simple` configuration) with a GIN index."""

    dialect = "postgresql"

    async def _counts(self, s: AsyncSession, terms: list[Term]) -> list[int]:
        params = {f"q{i}": _ts_word(t) for i, t in enumerate(terms)}
        columns = ", ".join(f"count(*) FILTER (WHERE tsv @@ to_tsquery('simple', :q{i}))"
                            for i in range(len(terms)))
        anyone = " || ".join(f"to_tsquery('simple', :q{i})" for i in range(len(terms)))
        row = (await s.execute(text(f"SELECT {columns} FROM retrieval_chunks "
                                    f"WHERE tsv @@ ({anyone})"), params)).one()
        return [int(v or 0) for v in row]

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
