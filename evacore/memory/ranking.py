"""The retrieval score: lexical relevance (BM25 normalised by the query's own best case),
cosine similarity when vectors exist, combined, then times a recency factor.

    cover_m  = Σ_t idf_t · tf_t(k1+1) / (tf_t + k1(1 − b + b·len/avglen))  /  Σ_t idf_t
               (over the terms t of query message m: BM25 against an ideal chunk)
    lexical  = Σ_m w_m · cover_m / Σ_m w_m    (w = 1 for the newest message, × decay per older)
    relevance = lexical                              (no vectors)
              = v · cosine + (1 − v) · lexical       (hybrid, v = vector_weight)
    recency  = 1 − r · (1 − 2^(−age_turns / half_life))   (r = recency_weight; documents: 1)
    score    = relevance · recency

Must not: query storage; it scores candidates it is given, the same way on every database.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from evacore.memory._terms import Term, words

K1 = 1.2
B = 0.75


@dataclass
class Candidate:
    id: int
    source_kind: str
    text: str
    label: str
    position: int
    part: int = 0
    message_id: str | None = None
    document_id: str | None = None
    text_hash: str = ""
    lexical: float = 0.0
    cosine: float | None = None
    recency: float = 1.0
    score: float = 0.0
    found_by: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """The shape kept in diagnostics."""
        return {
            "id": self.id, "source": self.source(), "label": self.label,
            "lexical": round(self.lexical, 4),
            "cosine": None if self.cosine is None else round(self.cosine, 4),
            "recency": round(self.recency, 4), "score": round(self.score, 4),
            "found_by": self.found_by, "preview": self.text[:80],
        }

    def source(self) -> str:
        if self.message_id:
            return f"message:{self.message_id}"
        return f"document:{self.document_id}"


def idf(df: int, n: int) -> float:
    """BM25's idf, never negative: ln(1 + (n − df + 0.5) / (df + 0.5))."""
    df = min(max(df, 0), max(n, 0))
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


def lexical_score(terms: list[Term], text: str, idfs: dict[str, float],
                  avg_terms: float) -> float:
    """Per query message, BM25 of the text divided by the BM25 of an ideal chunk holding
    each of its terms once at average length (clipped to 1); then the messages' weighted
    mean. A message with many words weighs no more than one with few."""
    if not terms:
        return 0.0
    tokens = words(text)
    length = len(tokens) or 1
    counts = Counter(tokens)
    vocabulary = sorted(counts) if any(t.prefix for t in terms) else []
    norm = K1 * (1 - B + B * length / max(avg_terms, 1.0))
    got: dict[int, float] = {}
    best: dict[int, float] = {}
    weight: dict[int, float] = {}
    for term in terms:
        w = idfs.get(term.text, 0.0)
        best[term.group] = best.get(term.group, 0.0) + w
        weight[term.group] = term.weight
        tf = _prefix_count(vocabulary, counts, term.text) if term.prefix else counts[term.text]
        if tf:
            got[term.group] = got.get(term.group, 0.0) + w * tf * (K1 + 1) / (tf + norm)
    total = sum(weight[g] for g in best if best[g] > 0)
    if total <= 0:
        return 0.0
    return sum(weight[g] * min(1.0, got.get(g, 0.0) / best[g])
               for g in best if best[g] > 0) / total


def _prefix_count(vocabulary: list[str], counts: Counter[str], prefix: str) -> int:
    """Occurrences of words starting with `prefix` (vocabulary sorted)."""
    i = bisect_left(vocabulary, prefix)
    total = 0
    while i < len(vocabulary) and vocabulary[i].startswith(prefix):
        total += counts[vocabulary[i]]
        i += 1
    return total


def recency(age_turns: float, half_life: float, weight: float) -> float:
    """1 for a new message, falling towards 1 − weight as it ages."""
    if weight <= 0 or age_turns <= 0:
        return 1.0
    return 1.0 - weight * (1.0 - 2.0 ** (-age_turns / half_life))


def relevance(lexical: float, cosine: float | None, vector_weight: float) -> float:
    if cosine is None:
        return lexical
    return vector_weight * max(0.0, cosine) + (1.0 - vector_weight) * lexical


def score_all(cands: list[Candidate], *, terms: list[Term], idfs: dict[str, float],
              avg_terms: float, newest_position: int, half_life: float,
              recency_weight: float, vector_weight: float) -> list[Candidate]:
    """Score every candidate in place; returns them best first (ties: newer first)."""
    for c in cands:
        c.lexical = lexical_score(terms, c.text, idfs, avg_terms)
        if c.message_id:
            age = max(0, newest_position - c.position) / 2.0
            c.recency = recency(age, half_life, recency_weight)
        c.score = relevance(c.lexical, c.cosine, vector_weight) * c.recency
    return sorted(cands, key=lambda c: (-c.score, -c.position, c.id))


@dataclass
class Packed:
    kept: list[tuple[Candidate, str, int]]
    """(candidate, the inserted text, its tokens), best first."""
    cut: list[dict[str, Any]]


def pack(ranked: list[Candidate], *, min_score: float, top_k: int, budget: int,
         render: Callable[[Candidate], str], count: Callable[[str], int]) -> Packed:
    """Greedy: best first, above the threshold, at most `top_k`, within `budget` tokens.
    A result that does not fit is skipped and smaller later ones may still go in."""
    kept: list[tuple[Candidate, str, int]] = []
    cut: list[dict[str, Any]] = []
    used = 0
    for c in ranked:
        if c.score < min_score:
            cut.append({"id": c.id, "score": round(c.score, 4), "reason": "below_threshold"})
            continue
        if len(kept) >= top_k:
            cut.append({"id": c.id, "score": round(c.score, 4), "reason": "top_k"})
            continue
        text = render(c)
        tokens = count(text)
        if used + tokens > budget:
            cut.append({"id": c.id, "score": round(c.score, 4), "reason": "budget",
                        "tokens": tokens})
            continue
        used += tokens
        kept.append((c, text, tokens))
    return Packed(kept, cut)
