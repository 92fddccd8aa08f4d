"""The read session stages 2-5 share (pipeline/reads.py): one session across the stages, a
fresh one after a failure, every connection back in the pool when a tour ends (answered,
failed inside a stage, or aborted), and nothing held while the plugins' interceptors run."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import event

from evacore.core import Core
from evacore.pipeline.reads import end_reads, reads
from evacore.pipeline.stages.lorebook import Lorebook
from evacore.pipeline.stages.request import Request
from evacore.pipeline.stages.serialize import Serialize
from evacore.pipeline.tour import Tour
from evacore.plugins import Plugin
from tests.fakes.upstream import FakeUpstream
from tests.generate.helpers import fake_connection, messages, new_chat, stream


def _checked_out(core: Core) -> int:
    return int(core.engine.sync_engine.pool.checkedout())


@pytest.fixture
def holders(core: Core) -> Iterator[dict[int, asyncio.Task[Any] | None]]:
    """The task that checked out each pooled connection now out (background work a tour
    leaves, such as the retrieval index's update, holds its own)."""
    held: dict[int, asyncio.Task[Any] | None] = {}

    def out(_dbapi: Any, record: Any, _proxy: Any) -> None:
        held[id(record)] = asyncio.current_task()

    def back(_dbapi: Any, record: Any) -> None:
        held.pop(id(record), None)

    pool = core.engine.sync_engine.pool
    event.listen(pool, "checkout", out)
    event.listen(pool, "checkin", back)
    yield held
    event.remove(pool, "checkout", out)
    event.remove(pool, "checkin", back)


async def _settled(core: Core) -> int:
    """Connections still out once background work a tour leaves (the retrieval index's
    update) has had up to two seconds to give its own back: a leaked one never comes back."""
    for _ in range(40):
        if _checked_out(core) == 0:
            return 0
        await asyncio.sleep(0.05)
    return _checked_out(core)


async def test_one_session_serves_every_reading_stage_until_it_is_ended(core: Core) -> None:
    tour = Tour(chat_id="c", user_id=None, role="master")
    async with reads(core, tour) as first:
        pass
    async with reads(core, tour) as second:
        pass
    assert second is first
    await end_reads(tour)
    await end_reads(tour)  # ending twice is harmless
    async with reads(core, tour) as third:
        pass
    assert third is not first
    await end_reads(tour)
    assert _checked_out(core) == 0


async def test_a_failure_inside_ends_the_session_and_the_next_stage_reads_in_a_new_one(
    core: Core
) -> None:
    tour = Tour(chat_id="c", user_id=None, role="master")
    with pytest.raises(RuntimeError):
        async with reads(core, tour) as broken:
            await broken.connection()
            raise RuntimeError("a stage failed mid-read")
    assert _checked_out(core) == 0
    async with reads(core, tour) as fresh:
        assert fresh is not broken
    await end_reads(tour)


async def test_tours_give_every_connection_back(
    client: httpx.AsyncClient, core: Core, openai_fake: FakeUpstream,
    holders: dict[int, asyncio.Task[Any] | None]
) -> None:
    chat = await new_chat(client, await fake_connection(client, openai_fake))
    held_while_waiting: list[int] = []
    plugin = Plugin(name="slow_reader", version="1")

    @plugin.interceptor(capabilities=["prompt:read"])
    async def slow(ctx: Any) -> None:
        # a plugin may wait here for seconds: the tour gives its connection back meanwhile
        tour_task = core.tours.running[ctx.tour_id][1]
        for _ in range(200):
            await asyncio.sleep(0.01)
            held = sum(1 for t in holders.values() if t is tour_task)
            if not held:
                break
        held_while_waiting.append(held)

    core.plugins.manager.add(plugin)
    core.plugins.manager.update("slow_reader", enabled=True, permissions=["prompt:read"])
    openai_fake.script.reply("One.").reply("Two.")
    await stream(client, chat, "first")
    await stream(client, chat, "second")
    assert [m["content"] for m in await messages(client, chat)][-1] == "Two."
    assert held_while_waiting == [0, 0]
    assert await _settled(core) == 0


async def test_without_interceptors_the_read_session_ends_at_the_tours_first_wait(
    client: httpx.AsyncClient, core: Core, openai_fake: FakeUpstream,
    monkeypatch: pytest.MonkeyPatch, holders: dict[int, asyncio.Task[Any] | None]
) -> None:
    """With nothing to wait for before the request (the built-in interceptors do not wait),
    the read session's end is left to the loop's next pass, off the way to the first token:
    it comes when the provider's answer is awaited, and the connection goes back then."""
    chat = await new_chat(client, await fake_connection(client, openai_fake))
    held: dict[str, list[int]] = {"before_request": [], "while_waiting": []}
    serialize, request = Serialize.run, Request.run

    def count() -> int:
        return sum(1 for t in holders.values() if t is asyncio.current_task())

    async def at_serialize(self: Serialize, core_: Core, tour: Tour) -> None:
        held["before_request"].append(count())
        await serialize(self, core_, tour)

    async def at_request(self: Request, core_: Core, tour: Tour) -> None:
        await request(self, core_, tour)
        await asyncio.sleep(0)  # the task's first wait (for the provider, in a real tour)
        held["while_waiting"].append(count())

    monkeypatch.setattr(Serialize, "run", at_serialize)
    monkeypatch.setattr(Request, "run", at_request)
    openai_fake.script.reply("One.").reply("Two.").reply("Three.")
    for text in ("first", "second", "third"):
        await stream(client, chat, text)
    # the first tour waits for the stream rules' first load before its request: its
    # session ends at that wait; the later ones still hold it on the way to the request
    assert held["before_request"][1:] == [1, 1]
    if core.db.dialect == "sqlite":  # on PostgreSQL the end is a round trip, ended later
        assert held["while_waiting"] == [0, 0, 0]
    assert await _settled(core) == 0


async def test_a_stage_failing_mid_read_loses_nothing_and_leaks_nothing(
    client: httpx.AsyncClient, core: Core, openai_fake: FakeUpstream,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = await new_chat(client, await fake_connection(client, openai_fake))

    async def failing(self: Lorebook, core_: Core, tour: Tour, diag: dict[str, Any]) -> None:
        async with reads(core_, tour) as s:
            await s.connection()
            raise ValueError("the lorebook broke")

    monkeypatch.setattr(Lorebook, "_run", failing)
    openai_fake.script.reply("Still answered.")
    events = await stream(client, chat, "hello")
    assert "done" in [name for name, _ in events]
    assert [m["content"] for m in await messages(client, chat)] == ["hello", "Still answered."]
    assert await _settled(core) == 0
