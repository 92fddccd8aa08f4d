"""The plugin host's shared state (R14.5) against its own writes in flight: a read of the
stored state taken while this instance's write has not committed never undoes that write
(a failure counted meanwhile stays counted), and a write that rolled back is written again."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from evacore.core import Core
from evacore.plugins.host import PluginHost
from evacore.store import direct
from evacore.store.tables import PluginRecord
from tests.plugins.conftest import Loader
from tests.plugins.test_plugins_loading import GOOD


async def _stored_failures(core: Core) -> int:
    async with core.db.session() as s:
        state = await s.scalar(select(PluginRecord.state).where(PluginRecord.name == "good"))
    return int((state or {}).get("failures") or 0)


async def test_r14_5_a_read_during_an_uncommitted_write_keeps_the_counted_failure(
        core: Core, load_plugins: Loader) -> None:
    host = PluginHost(load_plugins({"good.py": GOOD}))
    manager = host.manager
    manager.record_failure("good", "interceptor", "error", "first")
    async with core.db.session() as s:
        await host.persist(s)
    assert await _stored_failures(core) == 1

    manager.record_failure("good", "interceptor", "error", "second")
    async with core.db.session() as writing:
        await host.persist(writing)
        await writing.flush()
        # The sync round (or an API route) reads the shared state before that commit.
        async with core.db.session() as reading:
            await host.refresh(reading)
        assert manager.state("good").failures == 2
    assert await _stored_failures(core) == 2
    async with core.db.session() as reading:
        await host.refresh(reading)
    assert manager.state("good").failures == 2
    assert "second" in (manager.state("good").last_error or "")


async def test_r14_5_a_write_that_rolled_back_is_written_by_the_next_save(
        core: Core, load_plugins: Loader) -> None:
    host = PluginHost(load_plugins({"good.py": GOOD}))
    host.manager.record_failure("good", "interceptor", "error", "lost once")
    with pytest.raises(RuntimeError):
        async with core.db.session() as s:
            await host.persist(s)
            raise RuntimeError("the save failed")
    assert await _stored_failures(core) == 0
    async with core.db.session() as reading:
        await host.refresh(reading)  # the stored (older) state does not undo the change
    assert host.manager.state("good").failures == 1

    async with core.db.session() as s:
        await host.save_hook(s, None)
    assert await _stored_failures(core) == 1


async def test_r14_5_another_instances_change_is_still_taken(
        core: Core, load_plugins: Loader) -> None:
    here = PluginHost(load_plugins({"good.py": GOOD}))
    there = PluginHost(load_plugins({"good.py": GOOD}))
    there.manager.update("good", enabled=False)
    async with core.db.session() as s:
        await there.persist(s)
    async with core.db.session() as s:
        await here.refresh(s)
    assert here.manager.state("good").enabled is False


async def test_r14_5_a_read_that_a_write_of_ours_overtook_is_not_taken(
        core: Core, load_plugins: Loader, monkeypatch: pytest.MonkeyPatch) -> None:
    """The read began before this instance's write and ended after its commit: what it read
    is older than that write, though nothing is being written any more."""
    host = PluginHost(load_plugins({"good.py": GOOD}))
    async with core.db.session() as s:
        await host.persist(s, {"good"})
    host.manager.record_failure("good", "interceptor", "error", "while reading")

    read = direct.execute
    overtaken = []

    async def read_then_write(session, stmt, params):  # type: ignore[no-untyped-def]
        rows = await read(session, stmt, params)  # the state before the failure's write
        if not overtaken:
            overtaken.append(True)
            async with core.db.session() as writing:
                await host.save_hook(writing, None)
        return rows

    monkeypatch.setattr(direct, "execute", read_then_write)
    async with core.db.session() as reading:
        await host.refresh(reading)
    assert overtaken
    assert host.manager.state("good").failures == 1
    assert await _stored_failures(core) == 1
