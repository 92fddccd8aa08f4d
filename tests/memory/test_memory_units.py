"""R2.5 pieces without a database: chunking with overlap, query terms, the documented score,
packing into the sub-budget, and where memory blocks land in a prompt."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

import pytest

from evacore.memory._terms import query_terms, words
from evacore.memory.blocks import BlockView
from evacore.memory.chunking import chunk_text
from evacore.memory.ranking import Candidate, idf, lexical_score, pack, recency, relevance
from evacore.pipeline.stages.memory import insert_blocks
from evacore.pipeline.tour import Tour
from evacore.prompt.elements import Element


def test_r2_5_chunks_overlap_and_cover_the_text() -> None:
    text = " ".join(f"Sentence {i} talks about topic {i}." for i in range(300))
    chunks = chunk_text(text, size=400, overlap=80)
    assert len(chunks) > 10 and all(len(c) <= 400 for c in chunks)
    assert all(c.endswith(".") for c in chunks[:-1])  # cut at sentence ends
    for a, b in itertools.pairwise(chunks):
        assert b.split(" ")[0] in a[-120:]  # the next chunk starts inside the previous one
    assert {w for c in chunks for w in words(c)} == set(words(text))
    assert chunk_text("short text") == ["short text"] and chunk_text("  ") == []


def test_r2_5_query_terms_drop_stop_words_and_weigh_the_newest_message() -> None:
    terms = query_terms(["What is my sister's cat called?", "The weather is nice."],
                        decay=0.25)
    by_text = {t.text: t for t in terms}
    assert set(by_text) == {"sist", "cat", "call", "weath", "nice"}
    assert by_text["sist"].prefix and not by_text["cat"].prefix
    assert by_text["cat"].weight == 1.0 and by_text["nice"].weight == 0.25
    assert by_text["cat"].matches("cat") and by_text["sist"].matches("sisters")
    ru = {t.text for t in query_terms(["Как зовут мою кошку?"])}
    assert ru == {"зову", "кошк"}  # "мою" is a stop word; stems match кошка/кошку/кошки


def test_r2_5_score_formula() -> None:
    terms = query_terms(["pumpernickel cat"], prefix=False)
    idfs = {"pumpernickel": idf(1, 1000), "cat": idf(100, 1000)}
    assert idfs["pumpernickel"] > idfs["cat"] > 0
    ideal = lexical_score(terms, "pumpernickel cat", idfs, avg_terms=2)
    rare_only = lexical_score(terms, "pumpernickel was here", idfs, avg_terms=3)
    common_only = lexical_score(terms, "a cat was here", idfs, avg_terms=4)
    assert ideal == pytest.approx(1.0)
    assert 1 > rare_only > 0.5 > common_only > 0
    assert lexical_score(terms, "nothing relevant", idfs, 2) == 0
    assert recency(0, 100, 0.3) == 1.0
    assert recency(100, 100, 0.3) == pytest.approx(0.85)
    assert recency(10_000, 100, 0.3) == pytest.approx(0.7, abs=1e-6)
    assert relevance(0.4, None, 0.5) == 0.4
    assert relevance(0.4, 0.8, 0.5) == pytest.approx(0.6)
    assert relevance(0.4, -0.2, 0.5) == pytest.approx(0.2)


def test_r2_5_pack_keeps_threshold_top_k_and_budget() -> None:
    def cand(i: int, score: float, size: int) -> Candidate:
        return Candidate(id=i, source_kind="message", text="x" * size, label="u", position=i,
                         message_id=f"m{i}", score=score)

    ranked = [cand(1, 0.9, 10), cand(2, 0.8, 100), cand(3, 0.7, 10), cand(4, 0.6, 10),
              cand(5, 0.1, 10)]
    packed = pack(ranked, min_score=0.2, top_k=2, budget=30, render=lambda c: c.text,
                  count=len)
    assert [c.id for c, _, _ in packed.kept] == [1, 3]
    reasons = {x["id"]: x["reason"] for x in packed.cut}
    assert reasons == {2: "budget", 4: "top_k", 5: "below_threshold"}


def _tour(*ids: str) -> Tour:
    tour = Tour(chat_id="c", user_id=None, role="master")
    for i in ids:
        kind = ("input" if i == "input" else "history" if i.startswith("history")
                else "card" if i.startswith("card") else "system")
        tour.prompt.append(Element(id=i, role="user" if kind in ("input", "history")
                                   else "system", content=i, source=i, kind=kind))
    return tour


def _blk(label: str, position: str = "after_char", mandatory: bool = False) -> BlockView:
    return BlockView(id=label, scope_kind="chat", scope_id="c", label=label, content=label,
                       mandatory=mandatory, read_only=False, limit=100, position=position,
                       role="system", created_at=datetime.now(UTC))


def test_r2_5_blocks_land_at_their_position() -> None:
    tour = _tour("main", "card.description", "card.scenario", "history:1", "input")
    insert_blocks(tour, [_blk("a"), _blk("b", mandatory=True), _blk("t", "top"),
                         _blk("pre", "before_char"), _blk("d", "depth:1")])
    assert [e.id for e in tour.prompt] == [
        "main", "memory:t", "memory:pre", "card.description", "card.scenario", "memory:a",
        "memory:b", "history:1", "memory:d", "input"]
    el = tour.prompt.get("memory:b")
    assert el is not None and el.protected and el.kind == "memory"
    assert tour.prompt.get("memory:a").protected is False  # type: ignore[union-attr]

    bare = _tour("main", "history:1", "input")
    insert_blocks(bare, [_blk("a")])
    assert [e.id for e in bare.prompt] == ["main", "memory:a", "history:1", "input"]
    nothing = _tour("history:1", "input")
    insert_blocks(nothing, [_blk("a"), _blk("b", "before_char")])
    assert [e.id for e in nothing.prompt] == ["memory:a", "memory:b", "history:1", "input"]
