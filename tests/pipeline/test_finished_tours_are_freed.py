"""A finished tour, and every database session it used, is freed by reference counting the
moment nothing holds it: none of it waits in a reference cycle for a full pass of the
garbage collector. Under load such passes walk every live object (tens of milliseconds each,
every few seconds); tours left in cycles made them both more frequent and longer, a pause
every stream in flight felt as added latency."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session, SessionTransaction

from evacore.channels.openai.routes import Answer
from evacore.pipeline.tour import Tour
from tests.fakes.upstream import FakeUpstream
from tests.generate.helpers import fake_connection, generate, new_chat, stream

WATCHED = (Tour, AsyncSession, Session, SessionTransaction)


@pytest.fixture
def cyclic_garbage() -> Iterator[list[object]]:
    """The objects that only the cycle collector could free, of the watched kinds, made
    while the test ran (collected once it is done: the list is filled at teardown's start
    by `collect`)."""
    gc.collect()
    gc.disable()
    found: list[object] = []
    try:
        yield found
    finally:
        gc.enable()


def _collect(found: list[object]) -> None:
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        found.extend(o for o in gc.garbage if isinstance(o, WATCHED))
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


def _kinds(found: list[object]) -> list[str]:
    return sorted({type(o).__name__ for o in found})


async def test_streamed_and_whole_answers_leave_no_tour_or_session_in_a_cycle(
    client: httpx.AsyncClient, openai_fake: FakeUpstream, cyclic_garbage: list[object]
) -> None:
    chat = await new_chat(client, await fake_connection(client, openai_fake))
    openai_fake.script.reply("One.").reply("Two.").reply("Three.")
    events = await stream(client, chat, "first")
    assert "done" in [name for name, _ in events]
    r = await generate(client, chat, "second")
    assert r.status_code == 200, r.text
    r = await client.post("/v1/chat/completions", headers={"X-Evacore-Chat": chat}, json={
        "model": "@fake openai-chat", "stream": True,
        "messages": [{"role": "user", "content": "third"}]})
    assert r.status_code == 200, r.text
    assert "Three." in r.text
    _collect(cyclic_garbage)
    assert _kinds(cyclic_garbage) == []


async def test_a_failed_tour_leaves_no_tour_in_a_cycle(
    client: httpx.AsyncClient, openai_fake: FakeUpstream, cyclic_garbage: list[object]
) -> None:
    chat = await new_chat(client, await fake_connection(client, openai_fake))
    openai_fake.script.error(400, "upstream broke")
    events = await stream(client, chat, "hello")
    assert "error" in [name for name, _ in events]
    _collect(cyclic_garbage)
    assert "Tour" not in _kinds(cyclic_garbage)


async def test_a_tour_with_tool_steps_leaves_no_tour_in_a_cycle(
    client: httpx.AsyncClient, openai_fake: FakeUpstream, cyclic_garbage: list[object]
) -> None:
    chat = await new_chat(client, await fake_connection(client, openai_fake))
    openai_fake.script.tool_call("no_such_tool", {"x": 1}).reply("Done anyway.")
    events = await stream(client, chat, "use a tool")
    names = [name for name, _ in events]
    assert "tool_result" in names and names[-1] == "done"
    _collect(cyclic_garbage)
    assert "Tour" not in _kinds(cyclic_garbage)


async def test_a_facade_answer_and_its_tour_are_freed_the_moment_the_answer_ends(
    client: httpx.AsyncClient, openai_fake: FakeUpstream, cyclic_garbage: list[object]
) -> None:
    """The facade's answer hooks itself into its tour's save: once the answer is out, nothing
    but that hook may refer to it, and the two must not hold each other until a collection."""
    chat = await new_chat(client, await fake_connection(client, openai_fake))
    openai_fake.script.reply("One.").reply("Two.")
    for i, streamed in enumerate((True, False)):
        r = await client.post("/v1/chat/completions", headers={"X-Evacore-Chat": chat}, json={
            "model": "@fake openai-chat", "stream": streamed,
            "messages": [{"role": "user", "content": f"turn {i}"}]})
        assert r.status_code == 200, r.text
        assert ("One." if i == 0 else "Two.") in r.text
        del r
    await asyncio.sleep(0.05)  # the stream's end and its task are done with the answer
    left = [type(o).__name__ for o in gc.get_objects() if isinstance(o, (Tour, Answer))]
    assert left == []
