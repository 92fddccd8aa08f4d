"""A tour's transactions without SQLAlchemy's Session (store/lean.py): what the work writes
commits or rolls back whole, with the ORM's writes when it needs the ORM midway; the
connection goes back to the pool and the write gate is free after every end, a cancel
included; whoever listens to statements, and every database but SQLite, gets an ordinary
session."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import event, insert, select
from sqlalchemy.exc import IntegrityError

from evacore.core import Core
from evacore.store import direct, lean
from evacore.store.tables import Chat, Setting

_ADD_SETTING = insert(Setting.__table__)


def _setting(key: str, value: Any) -> dict[str, Any]:
    return {"key": key, "value": {"v": value}, "updated_at": datetime.now(UTC)}


async def _value(core: Core, key: str) -> Any:
    async with core.session() as s:
        row = await s.get(Setting, key)
        return None if row is None else row.value["v"]


def _idle(core: Core) -> int:
    return int(core.engine.sync_engine.pool.checkedin())


async def _written_at_once(core: Core, key: str) -> None:
    """Another transaction writes without waiting: no one holds the write gate (a held one
    would keep this writer waiting for the busy timeout, ten seconds)."""
    async def write(s: Any) -> None:
        await direct.execute(s, _ADD_SETTING, _setting(key, "free"))

    await asyncio.wait_for(lean.transact(core.db, write), timeout=2)
    assert await _value(core, key) == "free"


async def test_direct_writes_commit_together_and_the_connection_goes_back(core: Core) -> None:
    sqlite = core.engine.dialect.name == "sqlite"
    idle = _idle(core)
    kinds: list[str] = []

    async def work(s: Any) -> str:
        kinds.append(type(s).__name__)
        await direct.execute(s, _ADD_SETTING, _setting("lean-a", 1))
        await direct.execute(s, _ADD_SETTING, _setting("lean-b", 2))
        return "done"

    assert await lean.transact(core.db, work) == "done"
    assert kinds == ["LeanSession" if sqlite else "AsyncSession"]
    assert (await _value(core, "lean-a"), await _value(core, "lean-b")) == (1, 2)
    if sqlite:
        assert _idle(core) == idle
        await _same_connection_next(core)


async def _same_connection_next(core: Core) -> None:
    """The connection went back to the pool as it was (the pool hands out the one returned
    last): one left to the garbage collector would be closed, and another handed out."""
    drivers = []

    async def note(s: Any) -> None:
        drivers.append(s.driver)

    await lean.transact(core.db, note)
    await lean.transact(core.db, note)
    assert drivers[0] is drivers[1]


async def test_a_pending_orm_write_that_fails_takes_the_direct_writes_with_it(
    core: Core
) -> None:
    async with core.session() as s:
        s.add(Setting(key="taken-key", value={"v": 0}))

    async def work(s: Any) -> None:
        await direct.execute(s, _ADD_SETTING, _setting("with-the-failure", 1))
        s.add(Setting(key="taken-key", value={"v": 1}))  # a duplicate, written at the commit

    with pytest.raises(IntegrityError):
        await lean.transact(core.db, work)
    assert await _value(core, "with-the-failure") is None
    await _written_at_once(core, "after-pending-failure")


async def test_a_failure_rolls_back_every_write_and_frees_the_gate(core: Core) -> None:
    idle = _idle(core)

    async def work(s: Any) -> None:
        await direct.execute(s, _ADD_SETTING, _setting("gone-a", 1))
        raise RuntimeError("the work failed")

    with pytest.raises(RuntimeError, match="the work failed"):
        await lean.transact(core.db, work)
    assert await _value(core, "gone-a") is None
    await _written_at_once(core, "after-failure")
    if core.engine.dialect.name == "sqlite":
        assert _idle(core) == idle


async def test_the_orm_midway_joins_the_same_transaction(core: Core) -> None:
    """Work that needs the ORM after a direct write gets it on the same connection: both
    writes commit together, or roll back together."""
    async def both(s: Any) -> None:
        await direct.execute(s, _ADD_SETTING, _setting("mixed-direct", 1))
        s.add(Setting(key="mixed-orm", value={"v": 2}))
        await s.flush()
        assert await s.scalar(select(Setting.value).where(Setting.key == "mixed-direct")) \
            == {"v": 1}  # the ORM reads the direct write: one transaction

    await lean.transact(core.db, both)
    assert (await _value(core, "mixed-direct"), await _value(core, "mixed-orm")) == (1, 2)

    async def both_then_fail(s: Any) -> None:
        await direct.execute(s, _ADD_SETTING, _setting("undone-direct", 1))
        s.add(Setting(key="undone-orm", value={"v": 2}))
        await s.flush()
        raise RuntimeError("after both")

    idle = _idle(core)
    with pytest.raises(RuntimeError):
        await lean.transact(core.db, both_then_fail)
    assert await _value(core, "undone-direct") is None
    assert await _value(core, "undone-orm") is None
    await _written_at_once(core, "after-mixed-failure")
    if core.engine.dialect.name == "sqlite":
        assert _idle(core) == idle


async def test_pending_orm_objects_are_written_by_the_commit(core: Core) -> None:
    async def add_only(s: Any) -> None:
        await direct.execute(s, _ADD_SETTING, _setting("pending-direct", 1))
        s.add(Setting(key="pending-orm", value={"v": 2}))  # no flush: the commit writes it

    await lean.transact(core.db, add_only)
    assert await _value(core, "pending-orm") == 2


async def test_a_listener_on_the_session_hears_the_commit(core: Core) -> None:
    heard: list[str] = []

    async def work(s: Any) -> None:
        await direct.execute(s, _ADD_SETTING, _setting("heard", 1))
        event.listen(s.sync_session, "after_commit", lambda _s: heard.append("committed"))

    await lean.transact(core.db, work)
    assert heard == ["committed"] and await _value(core, "heard") == 1


async def test_a_cancel_after_a_write_rolls_it_back_and_frees_the_gate(core: Core) -> None:
    wrote = asyncio.Event()

    async def work(s: Any) -> None:
        await direct.execute(s, _ADD_SETTING, _setting("cancelled", 1))
        wrote.set()
        await asyncio.sleep(30)

    idle = _idle(core)
    task = asyncio.ensure_future(lean.transact(core.db, work))
    await wrote.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await _value(core, "cancelled") is None
    await _written_at_once(core, "after-cancel")
    if core.engine.dialect.name == "sqlite":
        assert _idle(core) == idle


async def test_whoever_listens_to_statements_gets_an_ordinary_session(core: Core) -> None:
    if core.engine.dialect.name != "sqlite":
        assert lean.take(core.db) is None  # PostgreSQL: always an ordinary session
        return
    seen: list[str] = []

    def note(_c: Any, _cur: Any, statement: str, *_: Any) -> None:
        seen.append(statement)

    engine = core.engine.sync_engine
    event.listen(engine, "before_cursor_execute", note)
    try:
        assert lean.take(core.db) is None

        async def work(s: Any) -> None:
            await direct.execute(s, _ADD_SETTING, _setting("listened", 1))

        await lean.transact(core.db, work)
    finally:
        event.remove(engine, "before_cursor_execute", note)
    assert [q for q in seen if q.startswith("INSERT INTO settings")]
    assert await _value(core, "listened") == 1


async def test_with_no_idle_connection_the_work_runs_in_an_ordinary_session(core: Core) -> None:
    if core.engine.dialect.name != "sqlite":
        pytest.skip("the lean session is SQLite's")
    held = []
    try:
        while _idle(core):
            taken = lean.take(core.db)
            assert taken is not None
            held.append(taken)
        kinds: list[str] = []

        async def work(s: Any) -> None:
            kinds.append(type(s).__name__)
            await direct.execute(s, _ADD_SETTING, _setting("no-idle", 1))

        await lean.transact(core.db, work)
        assert kinds == ["AsyncSession"]
    finally:
        for taken in held:
            await taken.end()
    assert await _value(core, "no-idle") == 1


async def test_a_read_session_turns_ordinary_for_an_orm_read_and_closes_whole(core: Core) -> None:
    if core.engine.dialect.name != "sqlite":
        pytest.skip("the lean session is SQLite's")
    async with core.session() as s:
        s.add(Chat(id="lean-chat", title="read me"))
    idle = _idle(core)
    reading = lean.take(core.db)
    assert reading is not None
    chat = await reading.get(Chat, "lean-chat")  # an ORM read: an ordinary session opens
    assert chat is not None and chat.title == "read me"
    await reading.close()
    assert _idle(core) == idle
    await _written_at_once(core, "after-read")


async def test_the_reads_of_tours_and_pollers_stay_lean(core: Core) -> None:
    """A setting, a chat's memory blocks, the plugins' stored state, the auth epoch and the
    abort poll's reads: each is read on the driver, so a lean session stays lean for them
    (an ordinary session would cost a tour more than its statements do)."""
    if core.engine.dialect.name != "sqlite":
        pytest.skip("the lean session is SQLite's")
    from evacore.memory.blocks import ChatScopes, block_views_for_chat
    from evacore.pipeline.manager import _requests_here
    from evacore.plugins.host import PluginHost
    from evacore.plugins.manager import PluginManager
    from evacore.store.recall import forget
    from evacore.store.settings import get_setting, put_setting
    from evacore.store.tables import MemoryBlock
    from evacore.store.token_cache import read_epoch

    async with core.session() as s:
        s.add(Chat(id="lean-blocks", title="blocks"))
        await s.flush()
        for label, kind, scope in (("mine", "chat", "lean-blocks"), ("yours", "user", "u1"),
                                   ("other", "chat", "elsewhere")):
            s.add(MemoryBlock(scope_kind=kind, scope_id=scope, label=label, content=label))
        await put_setting(s, "lean-key", {"a": 1})
    reading = lean.take(core.db)
    assert reading is not None
    try:
        forget(reading, "settings")
        assert await get_setting(reading, "lean-key") == {"a": 1}
        assert await get_setting(reading, "lean-missing") is None
        views = await block_views_for_chat(reading, ChatScopes("lean-blocks", None, "u1"))
        assert [v.label for v in views] == ["yours", "mine"]  # the user's first, then the chat's
        await PluginHost(PluginManager()).refresh(reading)
        assert await read_epoch(reading) == 0
        assert await _requests_here(reading, instance_id="nobody", waiting=[]) == ([], [])
        assert reading._opened is None
    finally:
        await reading.close()
