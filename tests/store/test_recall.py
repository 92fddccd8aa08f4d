"""The short-lived read memory (store/recall.py) on both databases: repeated reads are served
from memory, a write through any session is seen by the next read at once (and by the
writing session itself), a rollback leaves nothing stale, and a change made outside the
ORM shows once the memory's time is up."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text, update

from evacore.core import Core
from evacore.store import recall as recall_module
from evacore.store.recall import recall
from evacore.store.settings import get_setting, put_setting
from evacore.store.tables import Setting


class Counter:
    def __init__(self) -> None:
        self.calls = 0

    async def load(self, session: object, key: str) -> object:
        self.calls += 1
        return await session.scalar(  # type: ignore[attr-defined]
            text("SELECT value FROM settings WHERE key = :k"), {"k": key})


async def test_repeated_reads_come_from_memory(core: Core) -> None:
    loads = Counter()
    for _ in range(3):
        async with core.session() as s:
            await recall(s, "settings", "probe", lambda s=s: loads.load(s, "probe"))
    assert loads.calls == 1


async def test_a_committed_write_is_seen_by_the_next_read(core: Core) -> None:
    async with core.session() as s:
        await put_setting(s, "global_variables", {"n": 1})
    async with core.session() as s:
        assert await get_setting(s, "global_variables") == {"n": 1}
    async with core.session() as s:  # an ORM update (no put_setting) is seen too
        await s.execute(update(Setting).where(Setting.key == "global_variables")
                        .values(value={"v": {"n": 2}}))
    async with core.session() as s:
        assert await get_setting(s, "global_variables") == {"n": 2}


async def test_the_writing_session_reads_its_own_write(core: Core) -> None:
    async with core.session() as s:
        assert await get_setting(s, "world_info") is None
    async with core.session() as s:
        await put_setting(s, "world_info", {"depth": 4})
        assert await get_setting(s, "world_info") == {"depth": 4}


async def test_a_rolled_back_write_leaves_the_old_value(core: Core) -> None:
    async with core.session() as s:
        await put_setting(s, "global_variables", {"kept": True})
    with pytest.raises(RuntimeError):
        async with core.session() as s:
            await put_setting(s, "global_variables", {"kept": False})
            raise RuntimeError("the transaction fails")
    async with core.session() as s:
        assert await get_setting(s, "global_variables") == {"kept": True}


async def test_readers_get_their_own_copy(core: Core) -> None:
    async with core.session() as s:
        await put_setting(s, "global_variables", {"list": [1]})
    async with core.session() as s:
        value = await get_setting(s, "global_variables")
        value["list"].append(2)
    async with core.session() as s:
        assert await get_setting(s, "global_variables") == {"list": [1]}


async def test_a_change_made_outside_the_orm_shows_after_the_memory_time(
    core: Core, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(recall_module, "REMEMBER_SECONDS", 0.2)
    async with core.session() as s:
        await put_setting(s, "global_variables", {"v": "old"})
    async with core.session() as s:
        assert await get_setting(s, "global_variables") == {"v": "old"}
    cast = "CAST(:v AS JSON)" if core.engine.dialect.name == "postgresql" else ":v"
    async with core.engine.begin() as conn:  # another process's write, as this one sees it
        await conn.execute(text(f"UPDATE settings SET value = {cast} "
                                "WHERE key = 'global_variables'"), {"v": '{"v": {"v": "new"}}'})
    async with core.session() as s:
        assert await get_setting(s, "global_variables") == {"v": "old"}  # still remembered
    await asyncio.sleep(0.25)
    async with core.session() as s:
        assert await get_setting(s, "global_variables") == {"v": "new"}


async def test_the_memory_stays_bounded_over_many_chats(core: Core, monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    """A long-lived server meets new chats all its life: keys read once and expired are swept
    out, so the memory never holds much more than `KEPT_AT_MOST` entries."""
    clock = [1000.0]
    monkeypatch.setattr(recall_module, "_now", lambda: clock[0])
    monkeypatch.setattr(recall_module, "KEPT_AT_MOST", 64)

    async def nothing() -> list[str]:
        return []

    async with core.session() as s:
        for i in range(1000):
            await recall(s, "lore", (f"chat-{i}", None, None), nothing)
            clock[0] += 0.1  # each key is read once and expires 2 s later
        memory = recall_module._memory(s)
        assert memory is not None
        assert 0 < len(memory) <= 64
        # what is still fresh is still answered from memory
        last = ("chat-999", None, None)
        assert ("lore", last) in memory
        calls = []

        async def counted() -> list[str]:
            calls.append(1)
            return []

        await recall(s, "lore", last, counted)
        assert calls == []
