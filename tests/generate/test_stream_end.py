"""The generate route's stream ends with its last batch: the tour's final events go out with
the response's end in one write, and only a batch after which nothing can follow counts as
last (a batch taken while more events still wait for the reader does not, even when the tour
ended meanwhile)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from evacore.channels.event_stream import LastChunk
from evacore.pipeline.events import Batch, EventSink
from evacore.server.routes.generate import _stream


async def _taken(sink: EventSink) -> list[bytes]:
    batches = aiter(sink.batches())
    first = await anext(batches)  # taken as the route takes it, before the stream starts
    return [chunk async for chunk in _stream(first, batches, sink)]


async def test_the_batch_that_empties_a_closed_sink_is_the_last() -> None:
    sink = EventSink()
    sink.emit("tour", {"tour_id": "t"})
    sink.emit("delta", {"text": "hi"})
    sink.close()
    chunks = await _taken(sink)
    assert len(chunks) == 1 and isinstance(chunks[0], LastChunk)
    assert b"event: tour" in chunks[0] and b'"hi"' in chunks[0]


async def test_a_first_batch_with_events_behind_it_is_not_the_last() -> None:
    sink = EventSink()
    sink.emit("tour", {"tour_id": "t"})
    batches: AsyncIterator[Batch] = aiter(sink.batches())
    first = await anext(batches)
    sink.emit("delta", {"text": "hi"})  # the tour goes on and ends before the stream starts
    sink.emit("done", {"finish_reason": "stop"})
    sink.close()
    chunks = [chunk async for chunk in _stream(first, batches, sink)]
    assert [type(c) for c in chunks] == [bytes, LastChunk]
    assert b"event: tour" in chunks[0] and b"event: done" in chunks[1]


async def test_a_tour_still_running_sends_no_last_chunk() -> None:
    sink = EventSink()
    sink.emit("tour", {"tour_id": "t"})
    batches = aiter(sink.batches())
    first = await anext(batches)
    stream = _stream(first, batches, sink)
    assert type(await anext(stream)) is bytes
    await stream.aclose()


async def test_the_events_are_closed_when_the_response_stops_at_the_last_batch() -> None:
    """The response stops reading at the last batch (before the events themselves end) and
    closes the stream: the events' generator is closed with it, its reader let go at once,
    not left suspended for the garbage collector's finalizer to close on another turn of
    the event loop."""
    sink = EventSink()
    sink.emit("tour", {"tour_id": "t"})
    batches = sink.batches()
    first = await anext(batches)
    sink.emit("done", {"finish_reason": "stop"})
    sink.close()
    stream = _stream(first, batches, sink)
    async for chunk in stream:
        if isinstance(chunk, LastChunk):
            break  # as `EventStream` does
    await stream.aclose()
    assert batches.ag_frame is None  # closed: nothing left to finalize
    assert sink.queue_now([("delta", {"text": "late"})]) is False  # no reader holds the sink
