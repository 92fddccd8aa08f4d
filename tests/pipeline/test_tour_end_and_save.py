"""A tour's answer ends in one pass of the event loop and is saved in the next: the work that
became ready meanwhile (other tours' tokens, a new request's first step) runs between the two
instead of waiting behind both, which is what a busy server's time to first token is made of."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from evacore.core import Core
from evacore.pipeline import runner
from evacore.pipeline.request import TourRequest
from tests.fakes.upstream import FakeUpstream
from tests.generate.helpers import fake_connection, messages, new_chat


async def test_work_ready_at_an_answer_s_end_runs_before_its_save(
    client: httpx.AsyncClient, core: Core, openai_fake: FakeUpstream,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    order: list[str] = []
    steps = runner.run_steps

    async def steps_then_other_work(*args: Any) -> None:
        await steps(*args)
        asyncio.get_running_loop().call_soon(order.append, "other work")

    monkeypatch.setattr(runner, "run_steps", steps_then_other_work)
    chat = await new_chat(client, await fake_connection(client, openai_fake))
    openai_fake.script.reply("The end.")
    me = (await client.get("/v1/me")).json()["id"]
    running = core.tours.start(TourRequest(chat_id=chat, user_id=me, role="master", text="Hi"))

    async def saving(session: Any, tour: Any) -> None:
        order.append("save")

    running.tour.save_hooks.append(saving)
    tour = await running.result()
    assert tour.status == "completed" and tour.answer == "The end."
    assert order == ["other work", "save"]
    assert [m["content"] for m in await messages(client, chat)] == ["Hi", "The end."]


async def test_an_abort_after_the_whole_answer_came_saves_it_whole(
    client: httpx.AsyncClient, core: Core, openai_fake: FakeUpstream,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A client that leaves (or a stop pressed) just as the answer's last token arrived,
    before it was saved: the answer is complete, and stored as the completed answer it is."""
    steps = runner.run_steps
    tours: list[Any] = []

    async def steps_then_abort(*args: Any) -> None:
        await steps(*args)
        loop = asyncio.get_running_loop()
        loop.call_soon(lambda: tours.append(core.tours.abort_local(tours[0].id,
                                                                   "client disconnected")))

    monkeypatch.setattr(runner, "run_steps", steps_then_abort)
    chat = await new_chat(client, await fake_connection(client, openai_fake))
    openai_fake.script.reply("All of it.")
    me = (await client.get("/v1/me")).json()["id"]
    running = core.tours.start(TourRequest(chat_id=chat, user_id=me, role="master", text="Hi"),
                               now=False)
    tours.append(running.tour)
    running.step_now()
    tour = await running.result()
    assert tours[1:] == [True]  # the abort came while the tour still ran
    assert tour.status == "completed" and tour.error is None
    assert tour.finish_reason == "stop" and tour.answer == "All of it."
    stored = await messages(client, chat)
    assert [m["content"] for m in stored] == ["Hi", "All of it."]
    variant = next(v for v in stored[-1]["variants"] if v["id"] == stored[-1]["active_variant"])
    assert variant["finish_reason"] == "stop"


async def test_an_abort_while_the_answer_streams_still_cuts_it(
    client: httpx.AsyncClient, core: Core, openai_fake: FakeUpstream,
) -> None:
    """The guard above is for a complete answer only: an abort during the stream stops it
    and the part that came is kept, marked aborted."""
    chat = await new_chat(client, await fake_connection(client, openai_fake))
    openai_fake.script.reply("One two three.", token_delay=0.2)
    me = (await client.get("/v1/me")).json()["id"]
    running = core.tours.start(TourRequest(chat_id=chat, user_id=me, role="master", text="Hi"))
    async for name, _ in running.events():
        if name == "delta":
            assert running.abort("stop pressed")
            break
    tour = await running.result()
    assert tour.status == "aborted" and not tour.answered
