"""A bounded cache of token counts keyed by (profile name, text hash), with hit counters.

Must not: store the texts themselves (only a 16-byte digest), or grow without bound.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable

from evacore.tokenize.profile import TokenizerProfile


def _blake2b(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _make_digest() -> Callable[[str], bytes]:
    try:
        import xxhash
    except ImportError:
        return _blake2b

    def xxh(text: str) -> bytes:
        return bytes(xxhash.xxh3_128_digest(text.encode("utf-8", "surrogatepass")))

    return xxh


text_digest = _make_digest()
"""16-byte digest of a text: xxh3-128 when `xxhash` is installed, else blake2b-128."""


class CountCache:
    """LRU map (profile name, digest) → token count. Thread-safe."""

    def __init__(self, max_entries: int = 50_000) -> None:
        self.max_entries = max_entries
        self.hits = 0
        self.misses = 0
        self._data: OrderedDict[tuple[str, bytes], int] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._data)

    def get(self, profile_name: str, digest: bytes) -> int | None:
        key = (profile_name, digest)
        with self._lock:
            value = self._data.get(key)
            if value is None:
                self.misses += 1
                return None
            self._data.move_to_end(key)
            self.hits += 1
            return value

    def put(self, profile_name: str, digest: bytes, count: int) -> None:
        key = (profile_name, digest)
        with self._lock:
            self._data[key] = count
            self._data.move_to_end(key)
            while len(self._data) > self.max_entries:
                self._data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self.hits = self.misses = 0

    def stats(self) -> dict[str, int]:
        return {"entries": len(self._data), "hits": self.hits, "misses": self.misses}


def cached_count(cache: CountCache, profile: TokenizerProfile, text: str) -> int:
    """The profile's count of `text`, computed once per (profile, text)."""
    digest = text_digest(text)
    found = cache.get(profile.name, digest)
    if found is not None:
        return found
    known = getattr(profile, "known", None)
    if known is not None:  # a remote profile: only what the backend counted is kept
        exact = known(text)
        if exact is None:
            return profile.count(text)  # an estimate until `cached_count_async` asks
        cache.put(profile.name, digest, exact)
        return int(exact)
    count = profile.count(text)
    if not getattr(profile, "degraded", False):
        cache.put(profile.name, digest, count)
    return count


async def cached_count_async(cache: CountCache, profile: TokenizerProfile, text: str) -> int:
    """As `cached_count`, using the profile's `count_async` (threads, remote endpoints)."""
    digest = text_digest(text)
    found = cache.get(profile.name, digest)
    if found is not None:
        return found
    count = await profile.count_async(text)
    if not getattr(profile, "degraded", False):  # a remote fallback estimate is not kept
        cache.put(profile.name, digest, count)
    return count
