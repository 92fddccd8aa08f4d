"""Benchmark of retrieval (R2.5): indexing throughput and lexical query latency (p50/p99) on
SQLite at 10,000 and 100,000 chunks, and a vector query at 10,000 chunks with the packaged
MiniLM when it is installed.

Must not: download anything; text is generated from a fixed seed (Zipf-distributed words),
in a temporary data folder that is removed afterwards.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from evacore.config import Settings
from evacore.core import Core, start_core
from evacore.memory import _minilm
from evacore.memory.embeddings import CachedBackend, MiniLMBackend
from evacore.memory.index import add_document, document_key
from evacore.memory.options import RetrievalOptions
from evacore.memory.retrieve import Query, search
from evacore.memory.schema import chunks

VOCABULARY = 30_000
WORDS_PER_CHUNK = 60
CHUNKS_PER_DOCUMENT = 1_000
TARGET_P50_MS = 20.0
_LETTERS = "etaoinshrdlcumwfgypbvkjxqz"
_LETTER_WEIGHTS = [12, 9, 8, 7.5, 7, 6.7, 6.3, 6, 6, 4.3, 4, 2.8, 2.8, 2.4, 2.4, 2.2, 2, 2, 1.9,
                   1.5, 1, 0.8, 0.2, 0.2, 0.1, 0.1]


def _vocabulary(rng: random.Random) -> list[str]:
    """Pseudo-words of 3 to 11 letters drawn with English letter frequencies."""
    words: set[str] = set()
    while len(words) < VOCABULARY:
        size = min(11, max(3, int(rng.gauss(6.5, 2))))
        words.add("".join(rng.choices(_LETTERS, _LETTER_WEIGHTS, k=size)))
    return sorted(words, key=lambda _: rng.random())


class Corpus:
    """Chunks of Zipf-distributed pseudo-words (word i has weight 1/(i+1))."""

    def __init__(self, seed: int = 42) -> None:
        rng = random.Random(seed)
        self.words = _vocabulary(rng)
        weights = 1.0 / np.arange(1, VOCABULARY + 1)
        self.p = weights / weights.sum()
        self.np = np.random.default_rng(seed)
        self.rng = rng

    def chunk_texts(self, n: int) -> list[str]:
        idx = self.np.choice(VOCABULARY, size=(n, WORDS_PER_CHUNK), p=self.p)
        words = self.words
        return [" ".join(words[i] for i in row) + "." for row in idx]

    def query(self) -> str:
        """Two mid-frequency words, one common, one rare: what a chat question looks like."""
        pick = self.rng.randrange
        return " ".join([self.words[pick(50, 2_000)], self.words[pick(50, 2_000)],
                         self.words[pick(0, 50)], self.words[pick(2_000, 20_000)]])


async def _index(core: Core, corpus: Corpus, count: int) -> float:
    """Add `count` chunks as documents of CHUNKS_PER_DOCUMENT chunks; returns seconds."""
    spent = 0.0
    for start in range(0, count, CHUNKS_PER_DOCUMENT):
        texts = corpus.chunk_texts(min(CHUNKS_PER_DOCUMENT, count - start))
        content = "\n\n".join(texts)
        t0 = time.perf_counter()
        async with core.session() as s:
            await add_document(s, name=f"doc{start}", content=content, scope_kind="global",
                               scope_id="", media_type="text/plain", size=len(content),
                               sha256="-", chunk_chars=max(len(t) for t in texts) + 1,
                               overlap=0)
        spent += time.perf_counter() - t0
    return spent


async def _stored(core: Core) -> int:
    from sqlalchemy import func, select

    async with core.session() as s:
        return int((await s.execute(select(func.count()).select_from(chunks))).scalar() or 0)


async def _latencies(core: Core, corpus: Corpus, n: int) -> tuple[float, float, float]:
    """Wall-clock p50 and p99 of a search, and the process CPU per search (all threads,
    SQLite's included): CPU is the steadier figure on a shared machine."""
    service = core.memory
    service.forget_stats()
    opts = RetrievalOptions()
    keys = [document_key("global")]
    times = []
    cpu = 0.0
    for i in range(n + 5):
        q = Query(keys=keys, texts=[corpus.query()], options=opts)
        t0, c0 = time.perf_counter(), time.process_time_ns()
        async with core.session() as s:
            await search(service, s, q)
        if i >= 5:  # the first queries warm the caches
            times.append((time.perf_counter() - t0) * 1000)
            cpu += (time.process_time_ns() - c0) / 1e9
    times.sort()
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
    return statistics.median(times), p99, cpu * 1000 / n


async def _vector(core: Core, corpus: Corpus, n: int) -> list[dict[str, Any]]:
    """Query latency with MiniLM over 10,000 stored vectors (random unit vectors stand in
    for chunk embeddings: embedding 10,000 chunks takes minutes on a CPU)."""
    from sqlalchemy import bindparam, select

    service = core.memory
    backend = CachedBackend(MiniLMBackend())
    service.use_backend(backend)
    rng = np.random.default_rng(1)
    store = (chunks.update().where(chunks.c.id == bindparam("cid"))
             .values(embedding=bindparam("vec"), embedding_model=backend.name))
    async with core.session() as s:
        ids = [r[0] for r in await s.execute(select(chunks.c.id).order_by(chunks.c.id))]
        vectors = rng.standard_normal((len(ids), 384)).astype("<f4")
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        await s.execute(store, [{"cid": i, "vec": v.tobytes()}
                                for i, v in zip(ids, vectors, strict=True)])
    sample = corpus.chunk_texts(4 if n < 50 else 16)
    t0 = time.perf_counter()
    await backend.embed(sample)
    per_s = len(sample) / (time.perf_counter() - t0)
    keys = [document_key("global")]
    opts = RetrievalOptions()
    times = []
    for i in range(n + 3):
        q = Query(keys=keys, texts=[f"question {i}: " + corpus.query()], options=opts)
        t0 = time.perf_counter()
        async with core.session() as s:
            await search(service, s, q)
        if i >= 3:
            times.append((time.perf_counter() - t0) * 1000)
    service.use_backend(None)
    return [
        {"bench": "retrieval", "metric": "hybrid_query_p50_ms_10k", "value":
         round(statistics.median(times), 2), "unit": "ms", "target": None, "met": None,
         "note": f"MiniLM query embedding + cosine over {len(ids)} vectors + lexical; "
                 f"{n} queries"},
        {"bench": "retrieval", "metric": "minilm_embed_chunks_per_s", "value": round(per_s, 1),
         "unit": "chunks/s", "target": None, "met": None,
         "note": f"numpy forward, {WORDS_PER_CHUNK}-word chunks, one BLAS thread"},
    ]


async def _run(quick: bool) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    corpus = Corpus()
    queries = 60 if quick else 200
    with tempfile.TemporaryDirectory(prefix="evacore-bench-retrieval-") as tmp:
        core = await start_core(Settings(data_dir=Path(tmp), log_format="json",
                                         log_level="WARNING",
                                         master_token="evc_bench_retrieval_0123456789"))
        try:
            indexed, seconds = 0, 0.0
            for size in ((10_000,) if quick else (10_000, 100_000)):
                seconds += await _index(core, corpus, size - indexed)
                indexed = await _stored(core)
                p50, p99, cpu = await _latencies(core, corpus, queries)
                label = f"{size // 1000}k"
                target = TARGET_P50_MS if size == 100_000 else None
                rows += [
                    {"bench": "retrieval", "metric": f"index_chunks_per_s_{label}",
                     "value": round(indexed / seconds, 1), "unit": "chunks/s", "target": None,
                     "met": None, "note": f"{indexed} chunks of {WORDS_PER_CHUNK} words, SQLite "
                                          "FTS5 via triggers, chunking included"},
                    {"bench": "retrieval", "metric": f"lexical_query_p50_ms_{label}",
                     "value": round(p50, 2), "unit": "ms",
                     "target": f"< {TARGET_P50_MS:g} ms" if target else None,
                     "met": (p50 < target) if target else None,
                     "note": f"{queries} 4-word queries, all chunks in the searched scope, "
                             "full search: terms, FTS5 candidates, statistics, rescoring"},
                    {"bench": "retrieval", "metric": f"lexical_query_p99_ms_{label}",
                     "value": round(p99, 2), "unit": "ms", "target": None, "met": None,
                     "note": ""},
                    {"bench": "retrieval", "metric": f"lexical_query_cpu_ms_{label}",
                     "value": round(cpu, 2), "unit": "ms", "target": None, "met": None,
                     "note": "process CPU per search, all threads (mean)"},
                ]
                if size == 10_000 and _minilm.available():
                    rows += await _vector(core, corpus, 20 if quick else 50)
        finally:
            await core.aclose()
    return rows


def run(quick: bool = False) -> list[dict[str, Any]]:
    return asyncio.run(_run(quick))


def explain(rows: list[dict[str, Any]]) -> str:
    by = {r["metric"]: r["value"] for r in rows}
    wall, cpu = by.get("lexical_query_p50_ms_100k"), by.get("lexical_query_cpu_ms_100k")
    lines = [
        ("A lexical search is a handful of SQLite statements (term statistics in one, the FTS5 "
        "candidates, the candidate rows) plus rescoring the candidates in Python. FTS5 ranks "
        "every chunk that matches a searched term, so cost grows with how common the query's "
        "words are; words found in more than a set share of the chunks (`_COMMON_SHARE` in "
        "`evacore/memory/lexical.py`) are left out of that step."),
    ]
    if wall is not None and cpu is not None:
        lines.append(f"At 100k chunks a search took {wall} ms of wall time (p50) and {cpu} ms of "
                     "CPU (all threads): wall time above CPU time is waiting for a CPU on a "
                     "shared machine; CPU includes the hop to aiosqlite's thread per statement.")
    if "hybrid_query_p50_ms_10k" in by:
        lines.append("Hybrid queries are dominated by embedding the query with MiniLM on the "
                     "CPU; the cosine over the cached matrix is a single matrix-vector product.")
    return " ".join(lines)


if __name__ == "__main__":
    for row in run(quick=True):
        print(row)
