"""The memory service of a running core (`core.memory`): the lexical index of
this database, the vector cache, the embedding backend and its background worker, and the
save hook that indexes each tour's new messages (when retrieval may search them soon).

Must not: build prompts (the memory stage does) or speak HTTP (routes/memory.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING, Any

from evacore.logs import get_logger
from evacore.memory import embeddings as emb
from evacore.memory import vectors
from evacore.memory.index import index_recent
from evacore.memory.lexical import lexical_for
from evacore.memory.options import INSTANCE_KEY, RetrievalOptions, merge
from evacore.memory.vectors import VectorCache
from evacore.store.settings import get_setting, put_setting

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from evacore.store.db import Database

log = get_logger(__name__)
_EMBED_BATCH = 16
_PAUSE_AFTER_FAILURE = 60.0


class MemoryService:
    def __init__(self, db: Database) -> None:
        self.db = db
        self.lexical = lexical_for(db.dialect)
        self.vectors = VectorCache()
        self._config: emb.EmbeddingConfig | None = None
        self._backend: emb.CachedBackend | None = None
        self._loaded = False
        self._worker: asyncio.Task[None] | None = None
        self._paused_until = 0.0
        self.last_error: str | None = None

    # settings
    async def options(self, s: AsyncSession) -> RetrievalOptions:
        """The instance-wide retrieval options (defaults + the `retrieval` setting)."""
        return merge(await get_setting(s, INSTANCE_KEY))

    async def set_options(self, s: AsyncSession, patch: dict[str, Any]) -> RetrievalOptions:
        current = await get_setting(s, INSTANCE_KEY) or {}
        merged = {**current, **patch}
        options = merge(merged)
        await put_setting(s, INSTANCE_KEY, {k: v for k, v in merged.items() if v is not None})
        return options

    async def embedding_config(self) -> emb.EmbeddingConfig | None:
        await self.backend()
        return self._config

    async def set_embeddings(self, s: AsyncSession, value: dict[str, Any] | None) -> None:
        """Store the `embeddings` setting (validated); the backend is rebuilt on next use."""
        config = emb.parse_config(value)
        await put_setting(s, emb.SETTING_KEY, config.model_dump() if config else None)
        await self._drop_backend()

    async def backend(self) -> emb.CachedBackend | None:
        """The configured embedding backend, or None (vector search off, or paused for a
        while after the backend failed)."""
        if time.monotonic() < self._paused_until:
            return None
        if not self._loaded:
            async with self.db.session() as s:
                stored = await get_setting(s, emb.SETTING_KEY)
            try:
                self._config = emb.parse_config(stored)
            except Exception as exc:  # noqa: BLE001 - a broken setting only turns vectors off
                log.warning("memory.embeddings_setting_invalid", error=str(exc))
                self._config = None
            self._backend = emb.make_backend(self._config) if self._config else None
            self._loaded = True
        return self._backend

    def use_backend(self, backend: emb.CachedBackend | None) -> None:
        """Install a backend directly (tests and benchmarks with their own endpoint)."""
        self._backend, self._loaded = backend, True

    async def _drop_backend(self) -> None:
        await self._stop_worker()
        if self._backend is not None:
            await self._backend.aclose()
        self._backend, self._config, self._loaded = None, None, False
        self._paused_until, self.last_error = 0.0, None

    def note_failure(self, exc: BaseException) -> None:
        """A backend failure pauses vector search (lexical search goes on)."""
        self.last_error = f"{type(exc).__name__}: {exc}"
        self._paused_until = time.monotonic() + _PAUSE_AFTER_FAILURE
        log.warning("memory.embedding_failed", error=self.last_error)

    def forget_stats(self) -> None:
        self.lexical.forget()

    # indexing
    async def save_hook(self, s: AsyncSession, tour: Any) -> None:
        """Stage 14: index the tour's new user message and answer in the same transaction,
        unless its memory stage found no use for them yet (`index_at_save`: every message in
        the prompt, no vectors to prepare; the index catches up when it is searched)."""
        if tour.data.get("index_at_save") is False:
            return
        opts = tour.data.get("retrieval_options")
        chunking = ({"chunk_chars": opts.chunk_chars, "overlap": opts.chunk_overlap}
                    if isinstance(opts, RetrievalOptions) else {})
        await index_recent(s, tour.chat_id, **chunking)
        if self._backend is not None:
            self.kick()

    # embedding
    def kick(self) -> None:
        """Start the background worker that embeds chunks without a vector, if idle."""
        if self._backend is None or (self._worker is not None and not self._worker.done()):
            return
        self._worker = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        try:
            await self.embed_pending()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - retried on the next kick
            self.note_failure(exc)

    async def embed_pending(self, limit: int | None = None) -> int:
        """Embed chunks that have no vector of the current backend; returns how many."""
        backend = await self.backend()
        if backend is None:
            return 0
        done = 0
        while limit is None or done < limit:
            size = _EMBED_BATCH if limit is None else min(_EMBED_BATCH, limit - done)
            async with self.db.session() as s:
                batch = await vectors.pending(s, backend.name, size)
            if not batch:
                break
            matrix = await backend.embed([text for _, text in batch])
            async with self.db.session() as s:
                await vectors.store(s, backend.name, [i for i, _ in batch], matrix)
            done += len(batch)
        return done

    async def _stop_worker(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None and not worker.done():
            worker.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await worker

    async def aclose(self) -> None:
        await self._drop_backend()
