"""R14.1 on a real `evacore serve` socket: an OpenAI client that closes its stream, or gives
up on a non-stream answer, aborts the tour at once and evacore closes the upstream request."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.fakes.script import Reply
from tests.fakes.upstream import FAKE_API_KEY, FakeUpstream
from tests.generate.helpers import FAST_TIMEOUTS
from tests.helpers import ServerProcess, served_on_sqlite

pytestmark = pytest.mark.latency

TOKEN = "evc_facade_disconnect_token_0123456789"
WORDS = " ".join(f"word{i}" for i in range(200))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from served_on_sqlite(tmp_path_factory, "facade", TOKEN)


@pytest.fixture
async def api(server: ServerProcess) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, headers=server.headers(),
                                 timeout=10) as c:
        yield c


@pytest.fixture
async def fake(api: httpx.AsyncClient) -> AsyncIterator[FakeUpstream]:
    with FakeUpstream("openai-chat") as upstream:
        r = await api.post("/v1/connections", json={
            "name": f"slow{id(upstream)}", "kind": "openai-chat", "base_url": upstream.base_url,
            "api_key": FAKE_API_KEY, "model": "fake-model",
            "params": {"timeouts": FAST_TIMEOUTS, "retries": 0}})
        assert r.status_code == 201, r.text
        upstream.model = f"@slow{id(upstream)}"  # type: ignore[attr-defined]
        yield upstream


async def _settled(api: httpx.AsyncClient, tour_id: str) -> dict[str, Any]:
    for _ in range(100):
        tour = (await api.get(f"/v1/tours/{tour_id}")).json()
        if tour["status"] != "running":
            return tour
        await asyncio.sleep(0.05)
    raise AssertionError(f"tour {tour_id} still running")


@contextlib.asynccontextmanager
async def counting_slowly(server: ServerProcess, fake: FakeUpstream
                          ) -> AsyncIterator[tuple[Any, str]]:
    """A slow answer streamed through the SDK: the stream and its tour's id."""
    fake.script.add(Reply(text=WORDS, token_delay=0.02))
    async with openai.AsyncOpenAI(base_url=server.url + "/v1", api_key=TOKEN,
                                  max_retries=0) as oai:
        stream = await oai.chat.completions.create(
            model=fake.model, messages=[{"role": "user", "content": "Count slowly."}],  # type: ignore[attr-defined]
            stream=True)
        yield stream, stream.response.headers["x-evacore-tour"]


async def test_r14_1_closing_the_stream_after_two_chunks_closes_the_upstream(
    server: ServerProcess, api: httpx.AsyncClient, fake: FakeUpstream
) -> None:
    async with counting_slowly(server, fake) as (stream, tour_id):
        chunks = []
        async for chunk in stream:
            chunks.append(chunk)
            if len(chunks) == 2:
                break
        assert not fake.client_left.is_set()
        closed_at = time.monotonic()
        await stream.close()
    assert await fake.await_client_left(2.0), "the upstream request was never closed"
    lag = fake.disconnect_times[0] - closed_at
    assert lag < 1.0, f"upstream closed {lag * 1000:.0f} ms after the client left"
    tour = await _settled(api, tour_id)
    assert tour["status"] == "aborted"


async def test_r14_1_a_non_stream_client_that_gives_up_closes_the_upstream(
    server: ServerProcess, api: httpx.AsyncClient, fake: FakeUpstream
) -> None:
    fake.script.add(Reply(text=WORDS, token_delay=0.02))  # about 4 s of answer
    async with openai.AsyncOpenAI(base_url=server.url + "/v1", api_key=TOKEN, max_retries=0,
                                  timeout=0.8) as oai:
        with pytest.raises(openai.APITimeoutError):
            await oai.chat.completions.create(
                model=fake.model, messages=[{"role": "user", "content": "Count."}])  # type: ignore[attr-defined]
        gave_up = time.monotonic()
    assert await fake.await_client_left(2.0), "the upstream request was never closed"
    assert fake.disconnect_times[0] - gave_up < 1.0


async def test_r14_1_a_client_leaving_before_the_first_chunk_closes_the_upstream(
    server: ServerProcess, api: httpx.AsyncClient, fake: FakeUpstream
) -> None:
    fake.script.add(Reply(text=WORDS, first_token_delay=4.0))  # the model "thinks"
    async with openai.AsyncOpenAI(base_url=server.url + "/v1", api_key=TOKEN,
                                  max_retries=0) as oai:
        ask = asyncio.ensure_future(oai.chat.completions.create(
            model=fake.model, messages=[{"role": "user", "content": "Think."}],  # type: ignore[attr-defined]
            stream=True))
        for _ in range(250):  # until the upstream request is open (bounded)
            if fake.generation_requests:
                break
            await asyncio.sleep(0.02)
        assert fake.generation_requests and not ask.done()
        ask.cancel()  # no chunk has come yet: the client gives up on the response
        left_at = time.monotonic()
        with contextlib.suppress(asyncio.CancelledError):
            await ask
    assert await fake.await_client_left(2.0), "the upstream request was never closed"
    assert fake.disconnect_times[0] - left_at < 1.0


async def test_r14_1_a_stream_aborted_twice_still_ends_with_an_error_line_and_done(
    server: ServerProcess, api: httpx.AsyncClient, fake: FakeUpstream
) -> None:
    async with counting_slowly(server, fake) as (stream, tour_id):
        texts = []
        with pytest.raises(openai.APIError) as failed:
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    texts.append(chunk.choices[0].delta.content)
                if len(texts) == 3:  # a stop button pressed twice, quickly
                    first, second = await asyncio.gather(
                        api.post(f"/v1/tours/{tour_id}/abort"),
                        api.post(f"/v1/tours/{tour_id}/abort"))
                    assert first.status_code == second.status_code == 200
    assert "aborted" in str(failed.value)  # the error line came, not a cut connection
    tour = await _settled(api, tour_id)
    assert tour["status"] == "aborted"

