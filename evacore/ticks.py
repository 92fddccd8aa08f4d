"""One clock for an instance's periodic work: a poller sleeps to the next multiple of its
period on the event loop's clock, so pollers whose periods divide one another (the auth
epoch's quarter second, the abort poll's half, the server's second, the plugin sync's two,
the heartbeat's five) wake in the same pass of the loop: one wake-up of a sleeping process,
its caches warmed once, instead of one each at its own moment.

Must not: do any of the work; it only decides when a poller wakes.
"""

from __future__ import annotations

import asyncio


def until_next(now: float, period: float) -> float:
    """Seconds from `now` to the next multiple of `period`, skipping one closer than a tenth
    of a period (a poller that woke a hair early would otherwise run twice)."""
    delay = period - now % period
    return delay + period if delay < period / 10 else delay


async def sleep_to_next(period: float) -> None:
    """Sleep until the loop's clock reaches the next multiple of `period`."""
    loop = asyncio.get_running_loop()
    await asyncio.sleep(until_next(loop.time(), period))
