"""R8.4, R12.4: the tour's event queue is bounded while someone reads it: the producer of
deltas waits in `room()` once `max_bytes` wait unread, and goes on when the reader takes
them; control events never wait; nobody reading (a JSON tour) never blocks; bursts still
come out as one batch."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from types import SimpleNamespace
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


async def _reading(sink: EventSink) -> tuple[AsyncGenerator[Any], asyncio.Future[Any]]:
    """A reader that took its first batch and now waits for the next one (parked)."""
    reader = await _attached(sink)
    waiting = asyncio.ensure_future(anext(reader))
    await asyncio.sleep(0)  # it asks for the next batch and parks
    return reader, waiting


async def test_r12_4_a_fast_write_takes_the_deltas_the_reader_has_not_woken_for() -> None:
    """Deltas queued for a reader that has not run yet go out ahead of the fast lane's
    batch, in one write and in order; the reader then finds nothing of them (no token is
    written twice or held back for its wake-up)."""
    sink = EventSink()
    sink.record()
    written: list[list[tuple[str, dict[str, Any]]]] = []
    sink.write_through(None, lambda batch: written.append(batch))  # type: ignore[arg-type,func-returns-value]
    reader, waiting = await _reading(sink)
    sink.emit("delta", {"text": "a"})
    sink.emit("delta", {"text": "b"})
    assert sink.queued_bytes > 0
    assert sink.write_now([("delta", {"text": "c"})])
    assert written == [[("delta", {"text": "a"}), ("delta", {"text": "b"}),
                        ("delta", {"text": "c"})]]
    assert sink.queued() == [] and sink.queued_bytes == 0
    assert [d.get("text") for n, d in sink.history or [] if n == "delta"] == ["a", "b", "c"]
    sink.emit("done", {})
    sink.close()
    assert [name for name, _ in await waiting] == ["done"]  # the deltas are not read again
    await reader.aclose()


@pytest.mark.parametrize("queued", ["tool_call", "error"])
async def test_r12_4_a_fast_write_waits_behind_any_other_queued_event(queued: str) -> None:
    """An event that is not a delta stays the reader's to handle (a channel may end its
    stream on it): the fast lane then refuses, and nothing queued is taken."""
    sink = EventSink()
    written: list[Any] = []
    sink.write_through(None, lambda batch: written.append(batch))  # type: ignore[arg-type,func-returns-value]
    reader, waiting = await _reading(sink)
    sink.emit("delta", {"text": "a"})
    sink.emit(queued, {"name": "x"})
    assert not sink.write_now([("delta", {"text": "b"})])
    assert written == [] and [n for n, _ in sink.queued()] == ["delta", queued]
    assert [n for n, _ in await waiting] == ["delta", queued]
    await reader.aclose()


async def test_r12_4_the_fast_lane_queues_for_a_reader_no_writer_serves_yet() -> None:
    """Before a channel offers a writer (the facade waits for the first text to start its
    response) the fast lane's batch is queued from the read itself, after what waits, and
    the reader is woken for it."""
    sink = EventSink()
    reader, waiting = await _reading(sink)
    sink.emit("tool_call", {"name": "x"})
    assert not sink.write_now([("delta", {"text": "a"})])  # no writer: nothing written
    assert sink.queue_now([("delta", {"text": "a"}), ("delta", {"text": "b"})])
    batch = await asyncio.wait_for(waiting, 1)
    assert batch == [("tool_call", {"name": "x"}), ("delta", {"text": "a"}),
                     ("delta", {"text": "b"})]
    assert sink.queued_bytes == 0
    await reader.aclose()


async def test_r12_4_the_fast_lane_never_queues_past_the_bound_nor_for_nobody() -> None:
    """A full queue, a sink nobody reads or one closed refuses: the producer's task then
    queues the text itself and waits for room, so the queue stays bounded."""
    nobody = EventSink()
    assert not nobody.queue_now([("delta", {"text": "a"})]) and nobody.queued() == []
    sink = EventSink(max_bytes=cost("delta", {"text": "x" * 100}) * 2)
    reader, waiting = await _reading(sink)
    assert sink.queue_now([("delta", {"text": "x" * 100})])
    assert not sink.queue_now([("delta", {"text": "x" * 100}), ("delta", {"text": "w"})])
    assert sink.queue_now([("delta", {"text": "x" * 100})])  # the queue just full, not past
    assert sink.full  # the reader has not run yet
    assert not sink.queue_now([("delta", {"text": "y"})])
    assert [d["text"][0] for _, d in sink.queued()] == ["x", "x"]
    sink.close()
    assert not sink.queue_now([("delta", {"text": "z"})])
    assert [d["text"][0] for _, d in await waiting] == ["x", "x"]
    await reader.aclose()


async def test_r12_4_one_text_goes_straight_to_the_channel_only_when_nothing_is_before_it() -> None:
    """`text_lane` hands one delta's text to the channel's text writer when nothing is
    queued or being written and the producer has not stopped, and keeps it in the answer's
    parts; otherwise it refuses with nothing done (the caller goes the batch way, which
    keeps the order), and so does a sink that records its events."""
    sink = EventSink()
    texts: list[str] = []
    parts: list[str] = []
    stop = SimpleNamespace(fired=False)
    lane = sink.text_lane(parts, stop)
    assert not lane("a")  # no channel offered a text writer
    sink.write_through(None, lambda batch: None, lambda text: bool(texts.append(text)) or True)
    reader, waiting = await _reading(sink)
    assert lane("a") and texts == ["a"] and parts == ["a"] and sink.lane_texts == 1
    sink.emit("delta", {"text": "b"})  # queued for the reader, not yet taken
    assert not lane("c") and texts == ["a"] and parts == ["a"]
    assert await waiting == [("delta", {"text": "b"})]
    stop.fired = True  # the tour was aborted: nothing more goes out this way
    assert not lane("s") and texts == ["a"]
    stop.fired = False
    sink.write_through(None, lambda batch: None, lambda text: False)  # the connection is busy
    assert not lane("d") and parts == ["a"] and sink.lane_texts == 1
    recording = EventSink()
    recording.record()
    recording.write_through(None, lambda batch: None, lambda text: bool(texts.append(text)) or True)
    assert not recording.text_lane(parts, stop)("e") and texts == ["a"]
    sink.close()
    await reader.aclose()
