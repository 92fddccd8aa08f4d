"""uvicorn's server with a main loop that wakes once a second, not ten times, when idle.

uvicorn's own main loop sleeps a tenth of a second at a time, to refresh the `date` header
it sends (once a second) and to notice that it should stop. Each of those wake-ups costs a
cold pass of the event loop (about 0.2 ms of CPU here), so an idle evacore spent ~2 ms of
CPU a second on them, and a paced stream paid them on top of its tokens. This loop waits
for up to a second instead and refreshes the header on every wake-up (uvicorn's cadence);
setting `should_exit` (the signal handler does, and so does code that embeds the server)
wakes it at once, so stopping is as prompt as before.

Must not: change what uvicorn serves or how it shuts down: `on_tick` and `shutdown` are
uvicorn's own.
"""

from __future__ import annotations

import asyncio
import contextlib

import uvicorn

from evacore.ticks import until_next

TICK_SECONDS = 1.0
"""The longest the main loop sleeps: the `date` header is at most this old (as with uvicorn)."""


class QuietServer(uvicorn.Server):
    """`uvicorn.Server` whose main loop ticks once a second and wakes when told to stop."""

    def __init__(self, config: uvicorn.Config) -> None:
        self._stop_now: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None
        self._should_exit = False
        super().__init__(config)

    @property  # type: ignore[override]
    def should_exit(self) -> bool:
        return self._should_exit

    @should_exit.setter
    def should_exit(self, value: bool) -> None:
        self._should_exit = value
        if value and self._stop_now is not None:
            loop, event = self._stop_now
            with contextlib.suppress(RuntimeError):  # the loop has closed: nothing to wake
                loop.call_soon_threadsafe(event.set)  # safe from a signal handler or a thread

    async def main_loop(self) -> None:
        event = asyncio.Event()
        loop = asyncio.get_running_loop()
        self._stop_now = (loop, event)
        try:
            # uvicorn refreshes the date header when its counter is a multiple of ten
            while not await self.on_tick(0):
                with contextlib.suppress(asyncio.TimeoutError):
                    # on the instance's shared clock: its pollers wake in the same pass
                    await asyncio.wait_for(event.wait(), until_next(loop.time(), TICK_SECONDS))
        finally:
            self._stop_now = None
