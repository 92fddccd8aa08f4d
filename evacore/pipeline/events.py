"""The tour's outgoing events (R8.4): a bounded queue the channel (SSE, JSON, CLI) drains.

`emit()` never blocks (control events, errors and the end go in at once); the producer of
the answer's deltas awaits `room()` after each one, so while a reader is attached and
`max_bytes` of events wait unread, the provider's stream is read no faster than the
client reads. With no reader attached (a non-streaming tour) nothing waits.

Must not: format SSE or know about HTTP; it only carries (name, data) pairs in order.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

_END = object()
DEFAULT_MAX_BYTES = 1024 * 1024
"""Queued event bytes (text lengths, roughly) past which the producer waits for the reader."""
_EVENT_COST = 64
"""What one event costs on top of its text (the dict, the SSE frame's envelope)."""


def cost(name: str, data: dict[str, Any]) -> int:
    """The queue bytes an event takes: its string values' lengths plus a fixed envelope."""
    if name == "delta":
        return _EVENT_COST + len(data["text"])
    return _EVENT_COST + sum(len(v) for v in data.values() if isinstance(v, str))


class EventSink:
    """An in-order queue of events; `close()` ends the iteration."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self.closed = False
        self.history: list[tuple[str, dict[str, Any]]] | None = None
        self.max_bytes = max_bytes
        self.queued_bytes = 0
        """Cost of the events emitted and not yet taken by a reader."""
        self.peak_bytes = 0
        self.waits = 0
        """How many times the producer waited for the reader (back-pressure applied)."""
        self._readers = 0
        self._space = asyncio.Event()
        self._space.set()

    def emit(self, name: str, data: dict[str, Any]) -> None:
        if self.closed:
            return
        if self.history is not None:
            self.history.append((name, data))
        size = cost(name, data)
        self.queued_bytes += size
        self.peak_bytes = max(self.peak_bytes, self.queued_bytes)
        self._queue.put_nowait((name, data, size))

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
            self._space.clear()
            await self._space.wait()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._queue.put_nowait(_END)
            self._space.set()

    def record(self) -> None:
        """Keep every event in `history` too (tests, the CLI demo)."""
        self.history = []

    def _took(self, size: int) -> None:
        self.queued_bytes -= size
        if self.queued_bytes < self.max_bytes // 2:
            self._space.set()

    def _attach(self) -> None:
        self._readers += 1

    def _detach(self) -> None:
        self._readers -= 1
        if self._readers <= 0:
            self._space.set()  # nobody reads any more: the producer must not wait for them

    async def __aiter__(self) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        self._attach()
        try:
            while True:
                item = await self._queue.get()
                if item is _END:
                    return
                self._took(item[2])
                yield item[0], item[1]
        finally:
            self._detach()

    async def batches(self) -> AsyncIterator[list[tuple[str, dict[str, Any]]]]:
        """The events in order, each wait answered with every event queued by then: when a
        provider sends a burst, the channel writes it at once instead of event by event."""
        queue = self._queue
        self._attach()
        try:
            while True:
                item = await queue.get()
                if item is _END:
                    return
                batch = [(item[0], item[1])]
                taken = item[2]
                while not queue.empty():
                    item = queue.get_nowait()
                    if item is _END:
                        self._took(taken)
                        yield batch
                        return
                    batch.append((item[0], item[1]))
                    taken += item[2]
                self._took(taken)
                yield batch
        finally:
            self._detach()
