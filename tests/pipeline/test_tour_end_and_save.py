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
