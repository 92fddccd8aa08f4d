"""Trusted token answers (store/token_cache.py): the epoch watch stops reading the database
once every answer has expired, and a change of users or tokens made while it slept still
clears the answers remembered after it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from evacore.core import Core
from evacore.store import token_cache as token_cache_module
from evacore.store.token_cache import TokenCache, bump_epoch


async def _until(check: Callable[[], bool], seconds: float = 3.0) -> None:
    for _ in range(int(seconds / 0.02)):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("not reached in time")


async def _ended_watch(core: Core, monkeypatch: pytest.MonkeyPatch) -> TokenCache:
    """A cache whose one answer expired and whose watch has ended."""
    monkeypatch.setattr(token_cache_module, "REMEMBER_SECONDS", 0.1)
    cache = TokenCache(core.db, poll_seconds=0.05)
    async with core.session() as s:
        await cache.baseline(s)
    cache.put("first", "identity")
    assert cache.get("first") == "identity"
    await _until(lambda: cache._task is not None and cache._task.done())
    return cache


async def test_the_watch_ends_when_every_answer_has_expired(
        core: Core, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = await _ended_watch(core, monkeypatch)
    assert cache.get("first") is None and len(cache) == 0
    await cache.aclose()


async def test_a_change_made_while_the_watch_slept_clears_later_answers(
        core: Core, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = await _ended_watch(core, monkeypatch)
    async with core.session() as s:  # a user or token changes while nothing is trusted
        await bump_epoch(s)
    monkeypatch.setattr(token_cache_module, "REMEMBER_SECONDS", 30.0)
    async with core.session() as s:
        await cache.baseline(s)  # the epoch read last is still the baseline: no read here
    cache.put("second", "identity")  # checked against the database before the change was seen
    await _until(lambda: cache.get("second") is None)
    await cache.aclose()
