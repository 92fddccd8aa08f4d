"""R2.11, R8.5 on a real server socket: a client that leaves mid-stream, and an explicit
`POST /v1/tours/{id}/abort`, close the upstream request at once; the partial answer is kept
as an `aborted` variant and the tour ends `aborted`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import orjson
import pytest

from tests.conftest import MASTER_TOKEN, wipe
from tests.fakes.script import Reply
from tests.fakes.upstream import FAKE_API_KEY, FakeUpstream
from tests.generate.helpers import FAST_TIMEOUTS
from tests.helpers import ServerProcess

pytestmark = pytest.mark.latency

WORDS = " ".join(f"word{i}" for i in range(200))


@pytest.fixture(scope="module")
def server(db_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One real `evacore serve` per backend for this module."""
    asyncio.run(wipe(db_url))
    srv = ServerProcess(tmp_path_factory.mktemp("srv") / "data", db_url, MASTER_TOKEN).start()
    try:
        yield srv
    finally:
        srv.kill()


@pytest.fixture
async def api(server: ServerProcess) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, headers=server.headers(),
                                 timeout=10) as c:
        yield c


async def _chat_on(api: httpx.AsyncClient, fake: FakeUpstream) -> str:
    r = await api.post("/v1/connections", json={
        "name": "slow fake", "kind": fake.kind, "base_url": fake.base_url,
        "api_key": FAKE_API_KEY, "model": "fake-model", "params": {"timeouts": FAST_TIMEOUTS}})
    assert r.status_code == 201, r.text
    r = await api.post("/v1/chats", json={"connection_id": r.json()["id"]})
    assert r.status_code == 201, r.text
    return r.json()["id"]


async def _events(response: httpx.Response) -> AsyncIterator[tuple[str, Any]]:
    name = None
    async for line in response.aiter_lines():
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: ") and name:
            yield name, orjson.loads(line[6:])
            name = None


async def _leave(response: httpx.Response, events: AsyncIterator[Any]) -> float:
    """Close the client's connection now; returns the moment it was closed.

    `events` is kept alive until then: a dropped line iterator would close the
    connection by itself, earlier than the test means to.
    """
    closed_at = time.monotonic()
    await response.aclose()
    await events.aclose()  # type: ignore[attr-defined]
    return closed_at


async def _settled(api: httpx.AsyncClient, tour_id: str) -> dict[str, Any]:
    """The tour once it left `running` (bounded wait)."""
    for _ in range(100):
        tour = (await api.get(f"/v1/tours/{tour_id}")).json()
        if tour["status"] != "running":
            return tour
        await asyncio.sleep(0.05)
    raise AssertionError(f"tour {tour_id} still running")


async def _assert_aborted_partial(api: httpx.AsyncClient, chat: str, tour_id: str,
                                  seen: str) -> None:
    tour = await _settled(api, tour_id)
    assert tour["status"] == "aborted" and tour["error"]["code"] == "aborted"
    msgs = (await api.get(f"/v1/chats/{chat}/messages")).json()["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant"]
    [v] = msgs[1]["variants"]
    assert v["status"] == "aborted" and v["finish_reason"] == "abort"
    assert v["id"] == tour["variant_id"]
    assert v["content"].startswith(seen) and WORDS.startswith(v["content"])
    assert len(v["content"]) < len(WORDS)  # the upstream stopped: not the whole answer


@pytest.mark.parametrize("kind", ["openai-chat", "anthropic", "kobold"])
async def test_r2_11_client_disconnect_closes_the_upstream_within_100ms(
    api: httpx.AsyncClient, kind: str
) -> None:
    with FakeUpstream(kind) as fake:
        chat = await _chat_on(api, fake)
        fake.script.add(Reply(text=WORDS, token_delay=0.02))
        seen: list[str] = []
        tour_id = None
        async with api.stream("POST", f"/v1/chats/{chat}/generate",
                              json={"message": {"content": "Count slowly."}}) as response:
            assert response.status_code == 200
            events = _events(response)
            async for name, data in events:
                if name == "tour":
                    tour_id = data["tour_id"]
                elif name == "delta":
                    seen.append(data["text"])
                    if len(seen) == 3:
                        break
            assert not fake.client_left.is_set()
            closed_at = await _leave(response, events)
        # the server must drop the upstream request as soon as the client is gone
        assert await fake.await_client_left(2.0), "the upstream request was never closed"
        lag = fake.disconnect_times[0] - closed_at
        assert lag < 0.1, f"upstream closed {lag * 1000:.0f} ms after the client left"
        assert tour_id is not None
        await _assert_aborted_partial(api, chat, tour_id, "".join(seen))
        if kind == "kobold":  # KoboldCpp keeps generating unless told: it got an abort too
            [generation] = fake.generation_requests
            for _ in range(100):  # sent beside the save, not before it: bounded wait
                if fake.aborted_genkeys:
                    break
                await asyncio.sleep(0.02)
            assert fake.aborted_genkeys == [generation.json["genkey"]]


async def test_r2_11_client_leaving_before_the_first_token_closes_the_upstream(
    api: httpx.AsyncClient,
) -> None:
    with FakeUpstream("openai-chat") as fake:
        chat = await _chat_on(api, fake)
        fake.script.add(Reply(text=WORDS, first_token_delay=4.0))  # the model "thinks"
        async with api.stream("POST", f"/v1/chats/{chat}/generate",
                              json={"message": {"content": "Think hard."}}) as response:
            events = _events(response)
            name, data = await anext(events)
            assert name == "tour"
            for _ in range(250):  # until the upstream request is open (bounded)
                if fake.generation_requests:
                    break
                await asyncio.sleep(0.02)
            assert fake.generation_requests and not fake.client_left.is_set()
            closed_at = await _leave(response, events)
        assert await fake.await_client_left(2.0), "the upstream request was never closed"
        lag = fake.disconnect_times[0] - closed_at
        assert lag < 0.1, f"upstream closed {lag * 1000:.0f} ms after the client left"
        tour = await _settled(api, data["tour_id"])
        assert tour["status"] == "aborted" and tour["variant_id"] is None
        msgs = (await api.get(f"/v1/chats/{chat}/messages")).json()["messages"]
        assert [(m["role"], m["content"]) for m in msgs] == [("user", "Think hard.")]


async def test_r8_5_abort_during_a_stream_ends_it_with_an_aborted_error(
    api: httpx.AsyncClient,
) -> None:
    with FakeUpstream("openai-chat") as fake:
        chat = await _chat_on(api, fake)
        fake.script.add(Reply(text=WORDS, token_delay=0.02))
        seen: list[str] = []
        after_abort: list[tuple[str, Any]] = []
        tour_id = None
        async with api.stream("POST", f"/v1/chats/{chat}/generate",
                              json={"message": {"content": "Count slowly."}}) as response:
            async for name, data in _events(response):
                if tour_id is not None and len(seen) >= 3:
                    after_abort.append((name, data))
                    continue
                if name == "tour":
                    tour_id = data["tour_id"]
                elif name == "delta":
                    seen.append(data["text"])
                    if len(seen) == 3:
                        asked_at = time.monotonic()
                        r = await api.post(f"/v1/tours/{tour_id}/abort")
                        assert r.status_code == 200, r.text
                        assert r.json()["status"] in ("aborting", "aborted")
                        answered_at = time.monotonic()
        assert await fake.await_client_left(2.0)
        # the upstream request was closed while the abort request was being answered
        assert asked_at < fake.disconnect_times[0] < answered_at + 0.1
        assert after_abort, "the stream ended without an error event"
        name, err = after_abort[-1]
        assert name == "error" and err["code"] == "aborted" and err["message"]
        assert {n for n, _ in after_abort} <= {"delta", "error"}  # no message, no done
        text = "".join(seen) + "".join(d["text"] for n, d in after_abort if n == "delta")
        await _assert_aborted_partial(api, chat, tour_id, text)
        msgs = (await api.get(f"/v1/chats/{chat}/messages")).json()["messages"]
        assert msgs[1]["variants"][0]["content"] == text  # stored exactly what was streamed


async def test_r2_11_a_non_stream_client_that_gives_up_closes_the_upstream(
    api: httpx.AsyncClient,
) -> None:
    with FakeUpstream("openai-chat") as fake:
        chat = await _chat_on(api, fake)
        fake.script.add(Reply(text=WORDS, token_delay=0.02))  # about 4 s of answer
        waiting = asyncio.create_task(api.post(f"/v1/chats/{chat}/generate", json={
            "message": {"content": "Count slowly."}, "stream": False}))
        for _ in range(250):  # until the answer is on its way (bounded)
            if fake.generation_requests:
                break
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.2)
        assert not waiting.done() and not fake.client_left.is_set()
        gave_up_at = time.monotonic()
        waiting.cancel()  # the client stops waiting: its connection closes
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert await fake.await_client_left(2.0), "the upstream request was never closed"
        lag = fake.disconnect_times[0] - gave_up_at
        assert lag < 0.1, f"upstream closed {lag * 1000:.0f} ms after the client left"
        for _ in range(100):
            msgs = (await api.get(f"/v1/chats/{chat}/messages")).json()["messages"]
            if len(msgs) == 2:
                break
            await asyncio.sleep(0.05)
        assert [m["role"] for m in msgs] == ["user", "assistant"]
        [v] = msgs[1]["variants"]
        assert v["status"] == "aborted" and WORDS.startswith(v["content"])
        assert 0 < len(v["content"]) < len(WORDS)
