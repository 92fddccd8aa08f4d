"""Running tours of this instance: start them as tasks, abort them, shut them down.

Must not: run stages itself (runner.py does). Abort works across instances: an abort
request for a tour owned elsewhere is a database flag its owner polls.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from evacore.logs import get_logger
from evacore.pipeline.runner import run_tour
from evacore.store import tours as tour_store

if TYPE_CHECKING:
    from evacore.core import Core
    from evacore.pipeline.tour import Tour

log = get_logger(__name__)
ABORT_POLL_SECONDS = 0.5


class TourManager:
    def __init__(self, core: Core) -> None:
        self.core = core
        self.running: dict[str, tuple[Tour, asyncio.Task[None]]] = {}
        self._poller: asyncio.Task[None] | None = None

    def start(self, tour: Tour) -> asyncio.Task[None]:
        task = asyncio.create_task(self._run(tour), name=f"tour:{tour.id}")
        self.running[tour.id] = (tour, task)
        if self._poller is None or self._poller.done():
            self._poller = asyncio.create_task(self._poll_aborts(), name="tour-abort-poller")
        return task

    async def _run(self, tour: Tour) -> None:
        try:
            await run_tour(self.core, tour)
        finally:
            self.running.pop(tour.id, None)

    def abort_local(self, tour_id: str, reason: str = "aborted") -> bool:
        entry = self.running.get(tour_id)
        if entry is None:
            return False
        tour, task = entry
        tour.abort.fire(reason)
        task.cancel(reason)
        return True

    async def abort(self, tour_id: str, reason: str = "aborted") -> str:
        """Abort here if the tour runs here, else flag it for its owner; returns its status."""
        if self.abort_local(tour_id, reason):
            return "aborting"
        async with self.core.session() as s:
            row = await tour_store.request_abort(s, tour_id)
            return row.status

    async def _poll_aborts(self) -> None:
        while self.running:
            await asyncio.sleep(ABORT_POLL_SECONDS)
            ids = list(self.running)
            if not ids:
                break
            try:
                async with self.core.session() as s:
                    flagged = await tour_store.abort_requested(s, ids)
                for tour_id in flagged:
                    self.abort_local(tour_id, "aborted")
            except Exception:  # noqa: BLE001 - polling must not die on a transient error
                log.warning("tours.abort_poll_failed", exc_info=True)

    async def aclose(self) -> None:
        """Shutdown fires every running tour's abort; their partial answers are saved."""
        for tour_id in list(self.running):
            self.abort_local(tour_id, "shutdown")
        tasks = [task for _, task in self.running.values()]
        if tasks:
            await asyncio.wait(tasks, timeout=10)
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller
