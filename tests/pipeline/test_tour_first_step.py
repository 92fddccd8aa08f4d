"""A started tour's first step runs before `core.tours.start` returns (its stages up to their
first real wait), so under load its first token does not wait a whole pass of the event loop
for the tour's task to begin. A channel that puts something on the tour first starts it with
`now=False` and runs that step itself once it has."""

from __future__ import annotations

import httpx

from evacore.core import Core
from evacore.pipeline.request import TourRequest
from tests.fakes.upstream import FakeUpstream
from tests.generate.helpers import fake_connection, new_chat


async def _master_id(client: httpx.AsyncClient) -> str:
    return str((await client.get("/v1/me")).json()["id"])


async def _request(client: httpx.AsyncClient, fake: FakeUpstream, reply: str) -> TourRequest:
    """A master's tour on a new chat whose upstream answers `reply`."""
    chat = await new_chat(client, await fake_connection(client, fake))
    fake.script.reply(reply)
    return TourRequest(chat_id=chat, user_id=await _master_id(client), role="master",
                       text="Hi")


async def test_a_tour_has_begun_when_start_returns(
    client: httpx.AsyncClient, core: Core, openai_fake: FakeUpstream
) -> None:
    running = core.tours.start(await _request(client, openai_fake, "Hello there."))
    assert "waited_ms" in running.tour.diagnostics  # its task has run, with no await here
    tour = await running.result()
    assert tour.status == "completed" and tour.answer == "Hello there."


async def test_a_channel_can_prepare_the_tour_before_its_first_step(
    client: httpx.AsyncClient, core: Core, openai_fake: FakeUpstream
) -> None:
    running = core.tours.start(await _request(client, openai_fake, "Prepared."), now=False)
    assert "waited_ms" not in running.tour.diagnostics  # nothing ran yet
    running.tour.diagnostics["channel"] = "mine"
    running.step_now()
    assert "waited_ms" in running.tour.diagnostics
    running.step_now()  # once only
    tour = await running.result()
    assert tour.answer == "Prepared." and tour.diagnostics["channel"] == "mine"
    stored = (await client.get(f"/v1/tours/{tour.id}")).json()
    assert stored["diagnostics"]["channel"] == "mine"  # in the record its save wrote
