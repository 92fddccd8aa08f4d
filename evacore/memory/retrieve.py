"""One retrieval search: query terms from recent messages, candidates from the lexical index
and (when configured) the vector index, scored by ranking.py, stale message hits dropped.

Must not: touch the prompt or pack results into a budget (the memory stage does both).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from evacore.memory._terms import Term, query_terms
from evacore.memory.index import index_messages, load_messages
from evacore.memory.options import RetrievalOptions
from evacore.memory.ranking import Candidate, idf, score_all
from evacore.memory.schema import chunks, text_hash

if TYPE_CHECKING:
    from evacore.memory.service import MemoryService


@dataclass
class Query:
    keys: list[str]
    """Scope keys searched (index.chat_keys)."""
    texts: list[str]
    """Query texts, newest first."""
    options: RetrievalOptions
    chat_id: str | None = None
    exclude_message_ids: set[str] = field(default_factory=set)
    newest_position: int = 0


@dataclass
class Found:
    terms: list[Term]
    ranked: list[Candidate]
    vector_model: str | None = None
    excluded: int = 0
    stale: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)

    def diagnostics(self, limit: int = 20) -> dict[str, Any]:
        return {
            "terms": [{"text": t.text, "weight": round(t.weight, 3), "prefix": t.prefix,
                       "message": t.group} for t in self.terms],
            "vector_model": self.vector_model,
            "candidates": [c.summary() for c in self.ranked[:limit]],
            "candidates_total": len(self.ranked),
            "excluded_in_window": self.excluded,
            "stale": self.stale,
            "timings_ms": self.timings,
        }


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 3)


async def search(service: MemoryService, s: AsyncSession, q: Query) -> Found:
    opts = q.options
    texts = [t for t in q.texts if t.strip()]
    terms = query_terms(texts, decay=opts.query_decay, prefix=opts.prefix_match)
    found = Found(terms=terms, ranked=[])
    if not q.keys or not texts:
        return found
    t0 = time.perf_counter()
    lexical_ids = await _lexical(service, s, terms, q.keys, opts.candidates)
    found.timings["lexical"] = _ms(t0)
    cosines: dict[int, float] = {}
    backend = await service.backend()
    query_vector = None
    if backend is not None:
        t0 = time.perf_counter()
        try:
            query_vector = (await backend.embed(["\n".join(reversed(texts))]))[0]
            cosines = await service.vectors.search(s, q.keys, backend.name, query_vector,
                                                   opts.candidates)
            found.vector_model = backend.name
        except Exception as exc:  # noqa: BLE001 - vector search is optional; lexical goes on
            found.timings["vector_error"] = 1.0
            service.note_failure(exc)
            query_vector = None
        found.timings["vector"] = _ms(t0)
    ids = list(dict.fromkeys([*lexical_ids, *cosines]))
    if not ids:
        return found
    t0 = time.perf_counter()
    cands = await _load(s, ids)
    by_lexical = set(lexical_ids)
    for c in cands:
        c.found_by = [n for n, hit in (("lexical", c.id in by_lexical),
                                       ("vector", c.id in cosines)) if hit]
    kept = [c for c in cands if c.message_id not in q.exclude_message_ids]
    found.excluded = len(cands) - len(kept)
    recent = {text_hash(t.strip()) for t in texts}
    kept = [c for c in kept if c.text_hash not in recent]
    if query_vector is not None and backend is not None:
        missing = [c.id for c in kept if c.id not in cosines]
        if missing:
            cosines.update(await service.vectors.cosines(s, q.keys, backend.name,
                                                         query_vector, missing))
        for c in kept:
            c.cosine = cosines.get(c.id)
    stats = await service.lexical.stats(s)
    freqs = await service.lexical.doc_freqs(s, terms)
    idfs = {t.text: idf(freqs.get(t.text, 0), stats.chunks) for t in terms}
    ranked = score_all(
        kept, terms=terms, idfs=idfs, avg_terms=stats.avg_terms,
        newest_position=q.newest_position, half_life=opts.half_life_turns,
        recency_weight=opts.recency_weight, vector_weight=opts.vector_weight,
    )
    ranked, found.stale = await _drop_stale(s, q, ranked, opts)
    found.ranked = _distinct(ranked)
    found.timings["score"] = _ms(t0)
    return found


async def _lexical(service: MemoryService, s: AsyncSession, terms: list[Term],
                   keys: list[str], limit: int) -> list[int]:
    """Candidates for the newest message's own terms first, then for all terms: words of
    older messages must not crowd the newest message's matches out of the pool."""
    newest = [t for t in terms if t.group == 0] or terms
    ids = await service.lexical.candidates(s, newest, keys, limit)
    if len(newest) < len(terms):
        ids += await service.lexical.candidates(s, terms, keys, limit)
    return list(dict.fromkeys(ids))


def _distinct(ranked: list[Candidate]) -> list[Candidate]:
    """One candidate per text: repeated messages ("ok", a greeting) would fill every slot."""
    seen: set[str] = set()
    out = []
    for c in ranked:
        key = text_hash(" ".join(c.text.split()).casefold())
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


async def _load(s: AsyncSession, ids: list[int]) -> list[Candidate]:
    rows = await s.execute(select(
        chunks.c.id, chunks.c.source_kind, chunks.c.text, chunks.c.label, chunks.c.position,
        chunks.c.part, chunks.c.message_id, chunks.c.document_id, chunks.c.text_hash,
    ).where(chunks.c.id.in_(ids)))
    return [Candidate(id=r.id, source_kind=r.source_kind, text=r.text, label=r.label,
                      position=r.position, part=r.part, message_id=r.message_id,
                      document_id=r.document_id, text_hash=r.text_hash) for r in rows]


async def _drop_stale(s: AsyncSession, q: Query, ranked: list[Candidate],
                      opts: RetrievalOptions) -> tuple[list[Candidate], list[str]]:
    """Check the leading message hits against the messages as they are now (edited, hidden,
    another variant chosen); stale hits leave and their messages are re-indexed."""
    head = [c for c in ranked[: max(opts.top_k * 3, 10)] if c.message_id]
    if not head or q.chat_id is None:
        return ranked, []
    current = {m.id: m for m in await load_messages(
        s, q.chat_id, ids=list({c.message_id for c in head if c.message_id}))}
    stale: list[str] = []
    for c in head:
        m = current.get(c.message_id or "")
        wanted = "" if m is None or m.hidden else m.content.strip()
        if not wanted or text_hash(wanted) != c.text_hash:
            stale.append(c.message_id or "")
    if not stale:
        return ranked, []
    stale = list(dict.fromkeys(stale))
    await index_messages(s, q.chat_id, [current[i] for i in stale if i in current],
                         chunk_chars=opts.chunk_chars, overlap=opts.chunk_overlap)
    orphans = [i for i in stale if i not in current]
    if orphans:
        await s.execute(delete(chunks).where(chunks.c.message_id.in_(orphans)))
    gone = set(stale)
    return [c for c in ranked if c.message_id not in gone], stale
