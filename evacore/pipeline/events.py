"""The tour's outgoing events (R8.4): a bounded queue the channel (SSE, JSON, CLI) drains.

`emit()` never blocks (control events, errors and the end go in at once); the producer of
the answer's deltas awaits `room()` after each one, so while a reader is attached and
`max_bytes` of events wait unread, the provider's stream is read no faster than the
client reads. With no reader attached (a non-streaming tour) nothing waits.

Must not: format SSE or know about HTTP; it only carries (name, data) pairs in order.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

_END = object()
Batch = list[tuple[str, dict[str, Any]]]
Writer = Callable[[Batch], Awaitable[None]]
NowWriter = Callable[[Batch], "asyncio.Future[None] | None"]
"""Writes a batch at once, from any callback; returns None when it went out, or the
future of a write the transport made wait (its flow control), which finishes in order."""
TextWriter = Callable[[str], bool]
"""Writes one delta's text at once, from any callback, when its connection takes it
without waiting; False (nothing done, nothing framed) otherwise."""


class Stopped(Protocol):
    """What says a producer stopped (the tour's abort signal): `fired`, read without a call."""

    fired: bool


DEFAULT_MAX_BYTES = 1024 * 1024
"""Queued event bytes (text lengths, roughly) past which the producer waits for the reader."""
JOIN_AT = 16
"""The answer so far (a stream's `parts`) is joined into one text whenever it holds this
many: a relayed token's text is an object of some 55 bytes for a few characters, and a
stream in flight would otherwise hold every one of them until it ends."""
_EVENT_COST = 64
"""What one event costs on top of its text (the dict, the SSE frame's envelope)."""


def cost(name: str, data: dict[str, Any]) -> int:
    """The queue bytes an event takes: its string values' lengths plus a fixed envelope."""
    if name == "delta":
        return _EVENT_COST + len(data["text"])
    return _EVENT_COST + sum(len(v) for v in data.values() if isinstance(v, str))


class EventSink:
    """An in-order queue of events; `close()` ends the iteration.

    A list and one waiter per reader, not an `asyncio.Queue`: a relayed token is one
    `emit` and, at most, one reader's wake-up.
    """

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self._items: list[Any] = []  # a list: a deque allocates 0.5 KB before its first item
        self._waiters: list[asyncio.Future[None]] = []
        self.closed = False
        self.history: list[tuple[str, dict[str, Any]]] | None = None
        self.max_bytes = max_bytes
        self.queued_bytes = 0
        """Cost of the events emitted and not yet taken by a reader."""
        self.peak_bytes = 0
        self.waits = 0
        """How many times the producer waited for the reader (back-pressure applied)."""
        self.pending_since = 0.0
        """`time.perf_counter()` when the oldest event no reader has taken was emitted; 0
        when a reader took everything (the producer uses it to let the reader run)."""
        self._readers = 0
        self._space: asyncio.Event | None = None
        """What a producer waiting for room waits on (made by its first wait: most sinks
        never fill)."""
        self._writer: Writer | None = None
        self._now: NowWriter | None = None
        self._text: TextWriter | None = None
        self.lane_texts = 0
        """Texts written through `text_lane`, all readers and steps together."""
        self._pending: asyncio.Future[None] | None = None
        """A write of `write_now` that its transport made wait."""
        self._writing = False
        """A batch is being written (by the reader, by `relay` through the writer, or by
        `write_now` while its transport makes it wait)."""

    def write_through(self, writer: Writer | None, now: NowWriter | None = None,
                      text: TextWriter | None = None) -> None:
        """A streaming channel that writes a batch by awaiting `writer(batch)` offers it
        here (None takes it back): `relay` then hands a delta to it in the producer's own
        task, with no wake-up of the channel's task, whenever nothing waits in the queue.
        `now` also writes a batch without a task (`write_now`, the fast lane); `text`, one
        delta's text with no event made for it (`text_lane`)."""
        self._writer = writer
        self._now = now
        self._text = text

    def text_lane(self, parts: list[str], stopped: Stopped) -> Callable[[str], bool]:
        """One delta's text written at once, from any callback, when nothing is queued or
        being written, `stopped.fired` is not set, no history is recorded and the channel's
        connection takes it without waiting; the text is then added to `parts` (the answer
        so far) and counted in `lane_texts`. False (nothing done) otherwise: the caller
        then goes the way of `write_now` or `queue_now`. A relayed token's shortest way: no
        event tuple, no batch, one call from the network read to the channel's writer."""

        def take_text(text: str) -> bool:
            write = self._text
            if (write is None or stopped.fired or self._writing or self._items or self.closed
                    or self.history is not None or not write(text)):
                return False
            parts.append(text)
            if len(parts) >= JOIN_AT:
                parts[:] = ["".join(parts)]
            self.lane_texts += 1
            return True

        return take_text

    def write_now(self, batch: Batch) -> bool:
        """Write `batch` at once, from any callback, when a channel offered a writer for it
        and no batch is being written; False (nothing done) otherwise. Deltas queued for the
        reader and not yet taken (a burst it has not woken for) go first, in the same write:
        under load the reader's wake-up comes late, and every token meanwhile would wait for
        it. Any other event queued keeps the batch off (the reader handles it). A write its
        transport made wait keeps the next events queued until it finished."""
        now = self._now
        if now is None or self._writing or self.closed:
            return False
        queued = None
        if self._items:
            queued = self._take_deltas()
            if queued is None:
                return False
        if self.history is not None:
            self.history.extend(batch)
        pending = now(queued + batch if queued else batch)
        if pending is not None:
            self._writing = True
            self._pending = pending
            pending.add_done_callback(self._written)
        return True

    def queue_now(self, batch: Batch) -> bool:
        """Queue `batch` for the channel's reader from any callback, when `write_now` could
        not write it (no writer offered yet, as before the facade starts its response, or a
        write in progress): the reader is woken, the producer's task is not. False (nothing
        done) when nobody reads, the sink is closed or the batch would fill its queue: the
        producer's task then queues it itself and waits for room (the back-pressure), so
        the queue never holds more than `max_bytes` and one event."""
        if (self.closed or not self._readers or self.queued_bytes
                + sum(cost(name, data) for name, data in batch) > self.max_bytes):
            return False
        for name, data in batch:
            self.emit(name, data)
        return True

    def _written(self, _: object) -> None:
        self._pending = None
        self._writing = False

    def _take_deltas(self) -> Batch | None:
        """Every queued event, taken off the queue for the caller to write ahead of its own,
        when they are all deltas and one reader waits for them (a burst the reader has not
        woken for yet); None (nothing taken) otherwise: the reader writes what it frames."""
        items = self._items
        if self._readers != 1 or any(item is _END or item[0] != "delta" for item in items):
            return None
        taken = [(item[0], item[1]) for item in items]
        size = sum(item[2] for item in items)
        items.clear()
        self.pending_since = 0.0
        self._took(size)
        return taken

    async def relay(self, name: str, data: dict[str, Any]) -> bool:
        """Write one event through the channel's writer when it can go now, in order (the
        queue is empty, no batch is being written); else `emit` it. True when written.
        A client that reads slowly holds the producer here: that is the back-pressure."""
        writer = self._writer
        if writer is None or self._writing or self._items or self.closed:
            self.emit(name, data)
            return False
        if self.history is not None:
            self.history.append((name, data))
        self._writing = True
        try:
            await writer([(name, data)])
        finally:
            self._writing = False
        return True

    def emit(self, name: str, data: dict[str, Any]) -> None:
        if self.closed:
            return
        if self.history is not None:
            self.history.append((name, data))
        size = cost(name, data)
        self.queued_bytes += size
        self.peak_bytes = max(self.peak_bytes, self.queued_bytes)
        if not self._items:
            self.pending_since = time.perf_counter()
        self._items.append((name, data, size))
        if self._waiters:
            self._wake()

    def _wake(self) -> None:
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()

    @property
    def read(self) -> bool:
        """A reader is attached (a streaming channel)."""
        return self._readers > 0

    @property
    def full(self) -> bool:
        """A reader is attached and `max_bytes` of events wait for it."""
        return self._readers > 0 and self.queued_bytes >= self.max_bytes and not self.closed

    async def room(self) -> None:
        """Return once the reader has taken the queue below half of `max_bytes`, at once when
        it is not full (or nobody reads, or the sink is closed)."""
        if not self.full:
            return
        self.waits += 1
        while self.full:
            if self._space is None:
                self._space = asyncio.Event()
            self._space.clear()
            await self._space.wait()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._items.append(_END)
            self._wake()
            self._room_made()

    def record(self) -> None:
        """Keep every event in `history` too (tests, the CLI demo)."""
        self.history = []

    def queued(self) -> Batch:
        """The events emitted that no reader has taken yet, in order (a channel that frames
        what it takes knows what its client will get: what it framed, then these)."""
        return [(item[0], item[1]) for item in self._items if item is not _END]

    def _took(self, size: int) -> None:
        self.queued_bytes -= size
        if self.queued_bytes < self.max_bytes // 2:
            self._room_made()

    def _attach(self) -> None:
        self._readers += 1

    def _detach(self) -> None:
        self._readers -= 1
        if self._readers <= 0:
            self._room_made()  # nobody reads any more: the producer must not wait for them

    def _room_made(self) -> None:
        if self._space is not None:
            self._space.set()

    async def __aiter__(self) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        async for batch in self.batches():
            for event in batch:
                yield event

    async def batches(self) -> AsyncGenerator[Batch, None]:
        """The events in order, each wait answered with every event queued by then: when a
        provider sends a burst, the channel writes it at once instead of event by event."""
        items = self._items
        self._attach()
        try:
            while True:
                while not items or self._pending is not None:
                    if self._pending is not None:  # a fast-lane write waits: it goes first
                        await asyncio.wait([self._pending])
                        continue
                    waiter = asyncio.get_running_loop().create_future()
                    self._waiters.append(waiter)
                    try:
                        await waiter
                    finally:
                        if waiter in self._waiters:
                            self._waiters.remove(waiter)
                # the end, once queued, is the last item (`emit` adds nothing after
                # `close`), and it stays queued: every reader sees it
                ended = items[-1] is _END
                queued = items[:-1] if ended else items[:]
                del items[:len(queued)]
                batch = [(item[0], item[1]) for item in queued]
                taken = sum(item[2] for item in queued)
                self.pending_since = 0.0
                if taken:
                    self._took(taken)
                if batch:
                    self._writing = True  # until the reader asks for the next batch
                    try:
                        yield batch
                    finally:
                        self._writing = False
                if ended:
                    return
        finally:
            self._detach()
