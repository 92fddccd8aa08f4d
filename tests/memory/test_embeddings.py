"""R2.5 vector search: the packaged MiniLM run with numpy matches the reference model; an
OpenAI-compatible endpoint is called as documented; hybrid search finds a paraphrase that
lexical search misses; a failing endpoint leaves lexical search working."""

from __future__ import annotations

import numpy as np
import pytest

from evacore.core import Core
from evacore.errors import ProviderError
from evacore.memory import _minilm
from evacore.memory.embeddings import CachedBackend, OpenAIBackend
from evacore.memory.index import backfill, chat_keys
from evacore.memory.options import RetrievalOptions
from evacore.memory.retrieve import Query, search
from evacore.store.tables import Chat
from tests.memory.helpers import add_messages, embeddings_endpoint


@pytest.mark.skipif(not _minilm.available(), reason="the MiniLM package is not installed")
def test_r2_5_minilm_with_numpy_matches_the_reference_model() -> None:
    model = _minilm.load()
    assert model is not None
    rows = model.embed(["The weather is lovely today.", "It's so sunny outside!",
                        "He drove to the stadium."])
    assert rows.shape == (3, 384)
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)
    sims = rows @ rows.T
    # sentence-transformers' own similarities for these sentences
    assert sims[0, 1] == pytest.approx(0.6660, abs=2e-3)
    assert sims[0, 2] == pytest.approx(0.1046, abs=2e-3)
    assert sims[1, 2] == pytest.approx(0.1411, abs=2e-3)


async def test_r2_5_openai_compatible_embeddingsembeddings_endpoint() -> None:
    seen: list[dict] = []
    backend = OpenAIBackend("http://127.0.0.1:8080/v1/", "e5-small", "sk-x", batch=2,
                            transport=embeddings_endpoint(seen))
    rows = await backend.embed(["a car", "the sea", "a sedan"])
    assert rows.shape == (3, 16)
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0)
    assert rows[0] @ rows[2] > 0.9 > rows[0] @ rows[1]
    assert [s["body"]["input"] for s in seen] == [["a car", "the sea"], ["a sedan"]]
    assert seen[0]["url"] == "http://127.0.0.1:8080/v1/embeddings"
    assert seen[0]["body"]["model"] == "e5-small" and seen[0]["auth"] == "Bearer sk-x"
    failing = OpenAIBackend("http://127.0.0.1:8080/v1", "e5", transport=embeddings_endpoint([], 503))
    with pytest.raises(ProviderError, match="503"):
        await failing.embed(["x"])
    await backend.aclose()
    await failing.aclose()


async def _chat_with(core: Core, lines: list[str]) -> str:
    async with core.session() as s:
        chat = Chat(title="v")
        s.add(chat)
        await s.flush()
        chat_id = chat.id
    turns = [("user", line) for line in lines]
    await add_messages(core, chat_id, turns)
    async with core.session() as s:
        await backfill(s, chat_id, 0, 1000)
    return chat_id


async def _top(core: Core, chat_id: str, question: str) -> list[str]:
    async with core.session() as s:
        found = await search(core.memory, s, Query(
            keys=chat_keys(chat_id, None), texts=[question], options=RetrievalOptions(),
            chat_id=chat_id, newest_position=100))
    return [c.text for c in found.ranked if c.score >= RetrievalOptions().min_score]


async def test_r2_5_hybrid_search_finds_a_paraphrase(core: Core) -> None:
    fact = "I finally sold my old automobile last week."
    chat_id = await _chat_with(core, [fact, "The garden looks lovely today.",
                                      "We walked by the waves all afternoon.",
                                      "Dinner was pasta again."])
    question = "Did I get rid of the car?"
    assert fact not in await _top(core, chat_id, question)  # lexical search alone misses it
    service = core.memory
    seen: list[dict] = []
    service.use_backend(CachedBackend(OpenAIBackend("http://127.0.0.1:9/v1", "fake",
                                                    transport=embeddings_endpoint(seen))))
    assert await service.embed_pending() == 4
    assert (await _top(core, chat_id, question))[0] == fact


async def test_r2_5_a_failing_embeddings_endpoint_leaves_lexical_search(core: Core) -> None:
    chat_id = await _chat_with(core, ["My sister's cat is called Pumpernickel."])
    service = core.memory
    service.use_backend(CachedBackend(OpenAIBackend("http://127.0.0.1:9/v1", "fake",
                                                    transport=embeddings_endpoint([], 500))))
    hits = await _top(core, chat_id, "What's my sister's cat called?")
    assert hits == ["My sister's cat is called Pumpernickel."]
    assert service.last_error and "500" in service.last_error
    assert await service.backend() is None  # paused after the failure
