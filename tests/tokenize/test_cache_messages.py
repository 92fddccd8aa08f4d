"""R2.6: counts are computed once per (profile, text); chat-format overhead is counted."""

from __future__ import annotations

import json
from functools import partial

from evacore.tokenize import (
    CountCache,
    cached_count,
    cached_count_async,
    count_messages,
    get_profile,
)
from evacore.tokenize.messages import IMAGE_TOKENS, REPLY_PRIMING, TOKENS_PER_MESSAGE


class CallCounter:
    """A profile that counts words and records how often it really counted."""

    exact = True

    def __init__(self, name: str = "words") -> None:
        self.name = name
        self.calls = 0

    def count(self, text: str) -> int:
        self.calls += 1
        return len(text.split())

    async def count_async(self, text: str) -> int:
        return self.count(text)


def test_r2_6_count_is_computed_once_per_profile_and_text() -> None:
    cache = CountCache()
    profile = CallCounter()
    assert cached_count(cache, profile, "a b c") == 3
    assert cached_count(cache, profile, "a b c") == 3
    assert profile.calls == 1 and cache.hits == 1 and cache.misses == 1
    other = CallCounter("other")
    cached_count(cache, other, "a b c")
    assert other.calls == 1  # another profile's count is not reused


def test_r2_6_recount_after_one_change_costs_one_count() -> None:
    cache = CountCache()
    profile = CallCounter()
    prompt = [f"message number {i}" for i in range(50)]
    first = sum(cached_count(cache, profile, text) for text in prompt)
    prompt[17] = "an edited message with more words"
    calls_before = profile.calls
    second = sum(cached_count(cache, profile, text) for text in prompt)
    assert profile.calls - calls_before == 1
    assert second == first - 3 + 6


def test_r2_6_cache_is_bounded_lru() -> None:
    cache = CountCache(max_entries=3)
    profile = CallCounter()
    for text in ("a", "b", "c"):
        cached_count(cache, profile, text)
    cached_count(cache, profile, "a")  # refresh "a"
    cached_count(cache, profile, "d")  # evicts "b", the least recently used
    assert len(cache) == 3
    calls = profile.calls
    cached_count(cache, profile, "a")
    assert profile.calls == calls
    cached_count(cache, profile, "b")
    assert profile.calls == calls + 1
    assert cache.stats()["entries"] == 3


async def test_r2_6_cached_count_async() -> None:
    cache = CountCache()
    profile = CallCounter()
    assert await cached_count_async(cache, profile, "x y") == 2
    assert await cached_count_async(cache, profile, "x y") == 2
    assert profile.calls == 1


def test_r2_6_count_messages_openai_constants() -> None:
    profile = get_profile("tiktoken:o200k_base")
    messages = [
        {"role": "system", "content": "You are Eva."},
        {"role": "user", "content": "Hello!", "name": "Ann"},
    ]
    expected = REPLY_PRIMING
    for message in messages:
        expected += TOKENS_PER_MESSAGE
        expected += sum(profile.count(v) for v in message.values())
    expected += 1  # the name
    assert count_messages(profile, messages) == expected
    assert count_messages(profile, []) == REPLY_PRIMING == 3
    assert TOKENS_PER_MESSAGE == 3


def test_r2_6_count_messages_tool_calls_and_parts() -> None:
    profile = CallCounter()
    tool_calls = [{"id": "c1", "type": "function",
                   "function": {"name": "read_file", "arguments": "{\"path\": \"a.txt\"}"}}]
    messages = [
        {"role": "assistant", "content": None, "tool_calls": tool_calls},
        {"role": "tool", "tool_call_id": "c1", "content": "file text here"},
        {"role": "user", "content": [{"type": "text", "text": "look at this"},
                                     {"type": "image_url", "image_url": {"url": "data:..."}}]},
    ]
    compact = json.dumps(tool_calls, separators=(",", ":"))
    expected = 3 + 3 * 3 + (1 + len(compact.split())) + (1 + 1 + 3) + (1 + 3 + IMAGE_TOKENS)
    assert count_messages(profile, messages) == expected


def test_r2_6_count_messages_through_cache() -> None:
    cache = CountCache()
    profile = CallCounter()
    messages = [{"role": "user", "content": "one two"}] * 4
    counter = partial(cached_count, cache, profile)
    assert count_messages(profile, messages, count=counter) == 3 + 4 * (3 + 1 + 2)
    assert profile.calls == 2  # "user" and "one two", each once
