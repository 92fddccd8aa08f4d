"""R2.12, R12.4: a client that reads slowly, or not at all, slows the provider instead of
filling evacore's memory. The fake upstream streams as fast as its socket lets it
(`Reply.flood_bytes`); a reader that stops leaves the tour's event queue at its bound and
the provider blocked in its writes (TCP back-pressure), and nothing is lost when the
reader goes on. On a real `evacore serve`, a client that never reads costs the server a
bounded amount of memory while the provider has far more to send.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import orjson
import pytest

from evacore.config import LimitSettings, Settings
from evacore.core import Core
from evacore.domain.roles import env_for_role
from evacore.pipeline.events import cost
from evacore.pipeline.tour import Tour
from tests.conftest import MASTER_TOKEN
from tests.fakes.script import Reply
from tests.fakes.upstream import FakeUpstream
from tests.generate.helpers import fake_connection, new_chat
from tests.helpers import PeakGrowth, ServerProcess

MB = 1_000_000
QUEUE = 64 * 1024
PIECE = 4096


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"limits": LimitSettings(event_queue_bytes=QUEUE)})


async def _tour(client: httpx.AsyncClient, core: Core, fake: FakeUpstream) -> Tour:
    chat = await new_chat(client, await fake_connection(client, fake))
    master = (await client.get("/v1/me")).json()["id"]
    return Tour(chat_id=chat, user_id=master, role="master", env=env_for_role("master"),
                input_text="Tell me everything.")


async def _plateau(fake: FakeUpstream, quiet: float = 1.0, limit: float = 8.0) -> int:
    """Wait until the fake has written nothing for `quiet` seconds; its bytes written."""
    deadline = time.monotonic() + limit
    last, since = fake.bytes_written, time.monotonic()
    while time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        now = fake.bytes_written
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return now
    raise AssertionError(f"the provider was never held back ({last} bytes written)")


async def test_r12_4_stalled_reader_holds_the_queue_and_the_provider(
    client: httpx.AsyncClient, core: Core, openai_fake: FakeUpstream
) -> None:
    openai_fake.script.add(Reply(flood_bytes=200 * MB, flood_piece=PIECE))
    tour = await _tour(client, core, openai_fake)
    manager = core.tours
    task = manager.start(tour).task
    batches = tour.events.batches()
    first = await anext(batches)  # attached; now the reader stops reading
    assert first[0][0] == "tour"
    written = await _plateau(openai_fake)
    assert written < 60 * MB, written  # the provider is blocked, far from its 200 MB
    assert tour.status == "running" and tour.events.waits >= 1
    assert tour.events.queued_bytes <= QUEUE + cost("delta", {"text": "x" * PIECE})
    got = sum(len(d["text"]) for batch in [await anext(batches) for _ in range(3)]
              for name, d in batch if name == "delta")
    assert got > 0  # the reader goes on: so does the stream
    manager.abort_local(tour.id, "client disconnected")
    await batches.aclose()
    await asyncio.wait_for(task, 10)
    assert tour.status == "aborted"
    assert await openai_fake.await_client_left(5)


async def test_r12_4_slow_reader_gets_every_byte(
    client: httpx.AsyncClient, core: Core, openai_fake: FakeUpstream
) -> None:
    size = 2 * MB
    openai_fake.script.add(Reply(flood_bytes=size, flood_piece=PIECE))
    tour = await _tour(client, core, openai_fake)
    task = core.tours.start(tour).task
    text, peak = 0, 0
    async for batch in tour.events.batches():
        peak = max(peak, sum(cost(n, d) for n, d in batch if n == "delta"))
        text += sum(len(d["text"]) for n, d in batch if n == "delta")
        await asyncio.sleep(0.002)  # a reader slower than the provider
    await asyncio.wait_for(task, 30)
    assert tour.status == "completed", tour.error
    assert text == (size // PIECE) * PIECE
    assert tour.events.waits > 0  # the producer was held back at least once
    assert peak <= QUEUE + cost("delta", {"text": "x" * PIECE})


# -- a real server and a client that never reads -------------------------------------------

def _request(chat_id: str, port: int) -> bytes:
    body = orjson.dumps({"message": {"content": "Tell me everything."}, "stream": True})
    head = (f"POST /v1/chats/{chat_id}/generate HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Authorization: Bearer {MASTER_TOKEN}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n")
    return head.encode() + body


@asynccontextmanager
async def _stalled(server: ServerProcess, fake: FakeUpstream, reply: Reply
                   ) -> AsyncIterator[tuple[httpx.AsyncClient, str, int, PeakGrowth]]:
    """A generate whose client sends its request and never reads the answer: yields the
    API client, the chat, what the provider had written once it was held, and the server's
    peak RSS growth; afterwards the tour must have let go of the upstream."""
    fake.script.add(reply)
    async with httpx.AsyncClient(base_url=server.url, headers=server.headers(),
                                 timeout=10) as api:
        chat = await new_chat(api, await fake_connection(api, fake))
        assert server.proc is not None
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", server.port))
        try:
            with PeakGrowth(server.proc.pid) as m:
                sock.sendall(_request(chat, server.port))  # and never read the answer
                written = await _plateau(fake, quiet=1.5, limit=15)
            yield api, chat, written, m
        finally:
            sock.close()
        assert await fake.await_client_left(5)  # the tour let go of the upstream


async def test_r12_4_server_memory_stays_bounded_when_the_client_never_reads(
    server: ServerProcess, openai_fake: FakeUpstream
) -> None:
    reply = Reply(flood_bytes=300 * MB, flood_piece=PIECE)
    async with _stalled(server, openai_fake, reply) as (api, chat, written, m):
        print(f"stalled client: provider wrote {written / MB:.1f} MB of 300; server "
              f"peak +{m.mib:.1f} MiB over {m.seconds:.1f} s")
        assert written < 80 * MB, written
        assert m.mib < 64, f"the server's peak RSS rose by {m.mib:.0f} MiB"
        tours = (await api.get(f"/v1/chats/{chat}")).status_code
        assert tours == 200  # the server answers others meanwhile


async def test_r12_4_paced_tokens_to_a_client_that_never_reads_hold_the_provider(
    server: ServerProcess, openai_fake: FakeUpstream
) -> None:
    # Tokens a millisecond apart are written to the client from the tour's own task (no
    # queue between them): a client that stops reading must still hold the provider back.
    reply = Reply(flood_bytes=100 * MB, flood_piece=16 * 1024, token_delay=0.001)
    async with _stalled(server, openai_fake, reply) as (_, _, written, m):
        print(f"stalled client, paced: provider wrote {written / MB:.1f} MB of 100; "
              f"server peak +{m.mib:.1f} MiB")
        # the sockets' kernel buffers take what they take (about 7 MB here, up to 15 MB
        # under load, as autotuning grows them); a relay that never waited for the client
        # lets the provider send all 100 MB and holds what the client left unread
        assert written < 50 * MB, written
        assert m.mib < 64, f"the server's peak RSS rose by {m.mib:.0f} MiB"
