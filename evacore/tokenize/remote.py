"""Count tokens with the backend's own tokenize endpoint (llama.cpp, vLLM, KoboldCpp).

Must not: fail a tour because the endpoint is down; it falls back to the heuristic (logged)
and retries after a pause. Fallback estimates are never cached as exact counts.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import structlog

from evacore.tokenize.cache import CountCache, text_digest
from evacore.tokenize.profile import HeuristicProfile, TokenizerProfile

log = structlog.get_logger(__name__)

ENDPOINTS = ("/tokenize", "/api/extra/tokencount")
"""Tried in this order: llama.cpp and vLLM share `/tokenize`; KoboldCpp's token count."""


def root_url(base_url: str) -> str:
    """The server root: the tokenize endpoints live beside `/v1`, not under it."""
    url = base_url.rstrip("/")
    for suffix in ("/v1", "/api"):
        url = url.removesuffix(suffix)
    return url


def _parse(endpoint: str, payload: Any) -> int:
    if not isinstance(payload, dict):
        raise ValueError("tokenize answer is not an object")  # noqa: TRY004 - a bad answer
    for key in ("count", "value"):
        value = payload.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    tokens = payload.get("tokens", payload.get("ids"))
    if isinstance(tokens, list):
        return len(tokens)
    raise ValueError(f"no token count in the answer of {endpoint}")


class RemoteProfile:
    """Counts through the backend; `count` (sync) only reads the cache or estimates (an
    estimate is never stored as this profile's count: `known` tells them apart)."""

    exact = True

    def __init__(
        self,
        base_url: str,
        *,
        model: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        timeout: float = 5.0,
        retry_after: float = 30.0,
        fallback: TokenizerProfile | None = None,
        max_cache: int = 20_000,
    ) -> None:
        self.base_url = root_url(base_url)
        self.model = model
        self.name = f"remote:{self.base_url}" + (f"#{model}" if model else "")
        self.http_client = http_client
        self.timeout = timeout
        self.retry_after = retry_after
        self.fallback = fallback or HeuristicProfile()
        self.cache = CountCache(max_cache)
        self.degraded = False
        """True while the endpoint is failing and counts are heuristic estimates."""
        self.endpoint: str | None = None
        """The endpoint that answered last (tried first next time)."""
        self._retry_at = 0.0
        self._own_client: httpx.AsyncClient | None = None

    def count(self, text: str) -> int:
        found = self.known(text)
        return found if found is not None else self.fallback.count(text)

    def known(self, text: str) -> int | None:
        """The backend's count of `text` if it was asked before, else None (the sync
        `count` then only estimates, and callers must not keep that estimate)."""
        return self.cache.get("", text_digest(text)) if text else 0

    async def count_async(self, text: str) -> int:
        if not text:
            return 0
        digest = text_digest(text)
        found = self.cache.get("", digest)
        if found is not None:
            return found
        if self.degraded and time.monotonic() < self._retry_at:
            return self.fallback.count(text)
        try:
            count = await self._request(text)
        except (httpx.HTTPError, ValueError) as exc:
            if not self.degraded:
                log.warning("tokenize.remote_failed", url=self.base_url, error=str(exc),
                            fallback=self.fallback.name)
            self.degraded = True
            self._retry_at = time.monotonic() + self.retry_after
            return self.fallback.count(text)
        if self.degraded:
            log.info("tokenize.remote_recovered", url=self.base_url)
        self.degraded = False
        self.cache.put("", digest, count)
        return count

    async def _request(self, text: str) -> int:
        client = self.http_client or self._client()
        order = [self.endpoint] if self.endpoint else []
        order += [e for e in ENDPOINTS if e != self.endpoint]
        last_error: Exception | None = None
        for endpoint in order:
            body: dict[str, Any]
            if endpoint == "/tokenize":
                body = {"content": text, "prompt": text, "add_special": False,
                        "add_special_tokens": False}
                if self.model:
                    body["model"] = self.model
            else:
                body = {"prompt": text}
            response = await client.post(self.base_url + endpoint, json=body,
                                         timeout=self.timeout)
            if response.status_code in (404, 405, 501):
                last_error = httpx.HTTPStatusError(
                    f"{endpoint}: {response.status_code}", request=response.request,
                    response=response)
                continue
            response.raise_for_status()
            count = _parse(endpoint, response.json())
            self.endpoint = endpoint
            return count
        raise last_error or ValueError("no tokenize endpoint")

    def _client(self) -> httpx.AsyncClient:
        if self._own_client is None:
            self._own_client = httpx.AsyncClient()
        return self._own_client

    async def aclose(self) -> None:
        if self._own_client is not None:
            await self._own_client.aclose()
            self._own_client = None
