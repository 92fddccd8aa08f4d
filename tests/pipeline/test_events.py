"""R8.4, R12.4: the tour's event queue is bounded while someone reads it: the producer of
deltas waits in `room()` once `max_bytes` wait unread, and goes on when the reader takes
them; control events never wait; nobody reading (a JSON tour) never blocks; bursts still
come out as one batch."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

import pytest

from evacore.pipeline.events import EventSink, cost


async def _attached(sink: EventSink) -> AsyncGenerator[list[tuple[str, dict[str, Any]]]]:
    """A reader attached to `sink.batches()` that has taken its first batch, then waits."""
    reader = sink.batches()
    first = asyncio.ensure_future(anext(reader))
    sink.emit("tour", {"tour_id": "t"})
    assert (await first)[0][0] == "tour"
    return reader  # type: ignore[return-value]


async def test_r12_4_producer_waits_when_full_and_resumes_when_read() -> None:
    sink = EventSink(max_bytes=1000)
    reader = await _attached(sink)
    piece = "x" * 200
    emitted = 0
    while not sink.full:
        sink.emit("delta", {"text": piece})
        emitted += 1
    assert sink.queued_bytes >= 1000
    waiting = asyncio.ensure_future(sink.room())
    await asyncio.sleep(0.05)
    assert not waiting.done()  # back-pressure: the producer is held
    batch = await anext(reader)  # the reader takes everything queued by now
    assert len(batch) == emitted > 1 and all(name == "delta" for name, _ in batch)
    await asyncio.wait_for(waiting, 1)
    assert sink.queued_bytes == 0 and sink.waits == 1
    await reader.aclose()


async def test_r12_4_control_events_never_wait() -> None:
    sink = EventSink(max_bytes=100)
    reader = await _attached(sink)
    for _ in range(50):
        sink.emit("delta", {"text": "y" * 100})
    sink.emit("error", {"code": "aborted", "message": "gone"})  # emit() is never blocking
    sink.close()
    events = [e for batch in [b async for b in reader] for e in batch]
    assert events[-1][0] == "error" and len(events) == 51


async def test_r12_4_no_reader_means_no_waiting() -> None:
    """A non-streaming tour has nobody reading its events: the producer must not block."""
    sink = EventSink(max_bytes=100)
    for _ in range(100):
        sink.emit("delta", {"text": "z" * 100})
    assert not sink.full
    await asyncio.wait_for(sink.room(), 0.1)
    assert sink.waits == 0


@pytest.mark.parametrize("how", ["close", "reader_leaves"])
async def test_r12_4_waiting_producer_released(how: str) -> None:
    sink = EventSink(max_bytes=100)
    reader = await _attached(sink)
    sink.emit("delta", {"text": "w" * 200})
    waiting = asyncio.ensure_future(sink.room())
    await asyncio.sleep(0.01)
    assert not waiting.done()
    if how == "close":
        sink.close()
    else:
        await reader.aclose()  # the client went away: nobody to wait for
    await asyncio.wait_for(waiting, 1)


async def test_r12_4_iteration_one_by_one_also_releases() -> None:
    sink = EventSink(max_bytes=300)
    got: list[str] = []

    async def read() -> None:
        async for name, _ in sink:
            got.append(name)
            await asyncio.sleep(0.001)

    task = asyncio.ensure_future(read())
    await asyncio.sleep(0)
    for _ in range(40):
        sink.emit("delta", {"text": "v" * 100})
        await sink.room()
        assert sink.queued_bytes <= 300 + cost("delta", {"text": "v" * 100})
    sink.close()
    await asyncio.wait_for(task, 2)
    assert got.count("delta") == 40 and sink.waits > 0
