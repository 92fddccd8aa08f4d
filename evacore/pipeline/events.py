"""The tour's outgoing events (R8.4): a queue the channel (SSE, JSON, CLI) drains.

Must not: format SSE or know about HTTP; it only carries (name, data) pairs in order.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

_END = object()


class EventSink:
    """An unbounded in-order queue of events; `close()` ends the iteration."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self.closed = False
        self.history: list[tuple[str, dict[str, Any]]] | None = None

    def emit(self, name: str, data: dict[str, Any]) -> None:
        if self.closed:
            return
        if self.history is not None:
            self.history.append((name, data))
        self._queue.put_nowait((name, data))

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._queue.put_nowait(_END)

    def record(self) -> None:
        """Keep every event in `history` too (tests, the CLI demo)."""
        self.history = []

    async def __aiter__(self) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        while True:
            item = await self._queue.get()
            if item is _END:
                return
            yield item

    async def batches(self) -> AsyncIterator[list[tuple[str, dict[str, Any]]]]:
        """The events in order, each wait answered with every event queued by then: when a
        provider sends a burst, the channel writes it at once instead of event by event."""
        queue = self._queue
        while True:
            item = await queue.get()
            if item is _END:
                return
            batch = [item]
            while not queue.empty():
                item = queue.get_nowait()
                if item is _END:
                    yield batch
                    return
                batch.append(item)
            yield batch
