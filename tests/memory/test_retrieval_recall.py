"""R2.5 retrieval quality: facts planted early in a long chat are found when asked about much
later: recall@5 ≥ 0.9 with lexical search alone (both databases), and with the packaged
MiniLM for vector and hybrid search on a smaller corpus."""

from __future__ import annotations

import pytest

from evacore.core import Core
from evacore.memory import _minilm
from evacore.memory.embeddings import CachedBackend, MiniLMBackend
from evacore.memory.index import backfill, chat_keys
from evacore.memory.options import RetrievalOptions
from evacore.memory.retrieve import Query, search
from evacore.store.tables import Chat
from tests.memory.corpus import FACTS, long_chat
from tests.memory.helpers import add_messages

PREVIOUS_ANSWER = "Thanks for telling me. Let's keep an eye on the rent and see how it develops."
_MINILM: dict[str, CachedBackend] = {}


async def _indexed_chat(core: Core, total: int, facts: list[tuple[str, str]]
                        ) -> tuple[str, list[str], dict[int, int]]:
    async with core.session() as s:
        chat = Chat(title="long")
        s.add(chat)
        await s.flush()
        chat_id = chat.id
    turns, where = long_chat(total, facts=facts)
    ids = await add_messages(core, chat_id, turns)
    async with core.session() as s:
        await backfill(s, chat_id, 0, 10_000)
    return chat_id, ids, where


async def _recall(core: Core, chat_id: str, ids: list[str], where: dict[int, int],
                  facts: list[tuple[str, str]], opts: RetrievalOptions, k: int = 5) -> float:
    service = core.memory
    hits = 0
    async with core.session() as s:
        for i, (_fact, question) in enumerate(facts):
            found = await search(service, s, Query(
                keys=chat_keys(chat_id, None), texts=[question, PREVIOUS_ANSWER],
                options=opts, chat_id=chat_id, newest_position=len(ids) + 1,
            ))
            top = [c.message_id for c in found.ranked if c.score >= opts.min_score][:k]
            hits += ids[where[i]] in top
    return hits / len(facts)


async def test_r2_5_lexical_recall_at_5_on_planted_facts(core: Core, backend: str) -> None:
    chat_id, ids, where = await _indexed_chat(core, 600, FACTS)
    recall = await _recall(core, chat_id, ids, where, FACTS, RetrievalOptions())
    print(f"\nlexical recall@5 ({backend}, 600 messages, {len(FACTS)} facts): {recall:.3f}")
    assert recall >= 0.9


def _minilm_backend() -> CachedBackend:
    if "b" not in _MINILM:
        _MINILM["b"] = CachedBackend(MiniLMBackend())
    return _MINILM["b"]


@pytest.mark.skipif(not _minilm.available(), reason="the MiniLM package is not installed")
@pytest.mark.parametrize("mode", ["vector", "hybrid"])
async def test_r2_5_vector_and_hybrid_recall_at_5(core: Core, backend: str, mode: str) -> None:
    facts = FACTS[:12]
    chat_id, ids, where = await _indexed_chat(core, 60, facts)
    service = core.memory
    service.use_backend(_minilm_backend())
    embedded = await service.embed_pending()
    assert embedded == len(ids)
    opts = RetrievalOptions(vector_weight=1.0 if mode == "vector" else 0.5)
    recall = await _recall(core, chat_id, ids, where, facts, opts)
    print(f"\n{mode} recall@5 ({backend}, 60 messages, {len(facts)} facts): {recall:.3f}")
    assert recall >= 0.9
