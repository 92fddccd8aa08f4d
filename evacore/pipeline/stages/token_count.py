"""Stage 6, token counting: count every element with the connection's tokenizer profile (R2.6).

Must not: remove anything (stage 7 does). Counts are cached per (profile, text) in one
process-wide cache, so recounting after interceptors costs only what changed. Each
element's count includes the chat format's per-message overhead.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from evacore.logs import get_logger
from evacore.tokenize import CountCache, TokenizerProfile, cached_count, cached_count_async
from evacore.tokenize import get_profile as _get_profile

if TYPE_CHECKING:
    from evacore.core import Core
    from evacore.pipeline.prompt import Element
    from evacore.pipeline.tour import Tour

log = get_logger(__name__)

MESSAGE_OVERHEAD = 3
"""Tokens a chat format spends around each message (role markers)."""
REPLY_PRIMING = 3
IMAGE_TOKENS = 85


def count_cache(core: Core) -> CountCache:
    cache = core.services.get("count_cache")
    if cache is None:
        cache = core.services["count_cache"] = CountCache()
    return cache


def profile_for(core: Core, tour: Tour) -> TokenizerProfile:
    """The connection's profile (cached per tour); a profile that cannot load falls back."""
    profile = tour.data.get("tokenizer")
    if profile is not None:
        return profile
    conn = tour.data["connection"]
    pool = core.services.get("providers")
    try:
        profile = _get_profile(conn.get("tokenizer"), model=conn.get("model"),
                               base_url=conn.get("base_url"),
                               http_client=getattr(pool, "client", None))
    except Exception as exc:  # noqa: BLE001 - a broken tokenizer must not break the chat
        log.warning("tokenizer.fallback", spec=conn.get("tokenizer"), error=str(exc))
        profile = _get_profile("heuristic")
    tour.data["tokenizer"] = profile
    tour.diagnostics.setdefault("tokens", {})["profile"] = profile.name
    return profile


def _parts(el: Element) -> tuple[str, int]:
    """The text to count and the fixed extras (images, name, tool calls)."""
    extra = MESSAGE_OVERHEAD + (1 if el.name else 0)
    if not isinstance(el.content, str):
        extra += IMAGE_TOKENS * sum(1 for p in el.content if p.get("type") == "image_url")
    text = el.text
    if el.tool_calls:
        text += json.dumps(el.tool_calls, separators=(",", ":"), ensure_ascii=False)
    return text, extra


def count_text(core: Core, tour: Tour, text: str) -> int:
    """Tokens of one text with this tour's profile (cached; sync)."""
    return cached_count(count_cache(core), profile_for(core, tour), text)


async def count_elements(core: Core, tour: Tour) -> int:
    """Count elements without a count; returns the prompt's total."""
    cache, profile = count_cache(core), profile_for(core, tour)
    total = REPLY_PRIMING
    for el in tour.prompt:
        if el.tokens is None:
            text, extra = _parts(el)
            el.tokens = await cached_count_async(cache, profile, text) + extra
        total += el.tokens
    return total


def count_prompt(core: Core, tour: Tour) -> int:
    """Sync recount for code that cannot await (counts missing elements from the cache)."""
    cache, profile = count_cache(core), profile_for(core, tour)
    total = REPLY_PRIMING
    for el in tour.prompt:
        if el.tokens is None:
            text, extra = _parts(el)
            el.tokens = cached_count(cache, profile, text) + extra
        total += el.tokens
    return total


class TokenCount:
    number = 6
    name = "token_count"

    async def run(self, core: Core, tour: Tour) -> None:
        cache = count_cache(core)
        hits = cache.hits
        total = await count_elements(core, tour)
        d: dict[str, Any] = tour.diagnostics.setdefault("tokens", {})
        d.update(prompt=total, elements=len(tour.prompt), cache_hits=cache.hits - hits)
