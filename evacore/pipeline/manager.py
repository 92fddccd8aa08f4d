"""Running tours of this instance: start them as tasks (the one door, R14.0) whose first
step runs at once, abort them, shut them down.

Must not: run stages itself (runner.py does) or speak a channel's protocol. Abort works
across instances: an abort request for a tour owned elsewhere is a database flag its owner
polls. Tours of one chat take turns (chat_turns.py): a second generate waits for the first
to be saved, so every message lands once, in order, answered from a prompt that holds it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from functools import partial
from typing import TYPE_CHECKING, Any

from evacore.eager import eager_task, first_step
from evacore.logs import get_logger
from evacore.pipeline import metrics
from evacore.pipeline.chat_turns import ChatTurns, Turn
from evacore.pipeline.events import Batch
from evacore.pipeline.request import TourRequest, tour_for
from evacore.pipeline.runner import run_tour
from evacore.pipeline.tour import Tour
from evacore.store import tours as tour_store
from evacore.store.lean import transact
from evacore.ticks import sleep_to_next

if TYPE_CHECKING:
    from evacore.core import Core

log = get_logger(__name__)
ABORT_POLL_SECONDS = 0.5


class RunningTour:
    """A started tour as a channel sees it: its events in order, its end, its abort."""

    def __init__(self, manager: TourManager, tour: Tour, task: asyncio.Task[None]) -> None:
        self.manager, self.tour, self.task = manager, tour, task

    @property
    def id(self) -> str:
        return self.tour.id

    def batches(self) -> AsyncGenerator[Batch, None]:
        """The tour's events, each batch holding every event queued by then (R8.4 names)."""
        return self.tour.events.batches()

    async def events(self) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """The tour's events one by one."""
        async for batch in self.batches():
            for event in batch:
                yield event

    async def result(self) -> Tour:
        """Wait for the tour's end (it is saved by then); a cancelled waiter leaves it running.
        A tour whose task ended cancelled (a cancel that did not come through its abort, such
        as the server's shutdown) ends aborted here: the waiter is not cancelled by it."""
        try:
            await asyncio.shield(self.task)
        except asyncio.CancelledError:
            if not self.task.cancelled():
                raise  # the waiter itself was cancelled
            if self.tour.error is None:
                self.tour.status = "aborted"
                self.tour.error = {"code": "aborted", "message": "the tour was aborted"}
        return self.tour

    def step_now(self) -> None:
        """Run the tour's first step now (`TourManager.start(..., now=False)`): its stages up
        to their first real wait. Nothing is done once the tour's task ran; without this
        call the task starts on the loop's next pass."""
        first_step(self.task)

    def abort(self, reason: str = "aborted") -> bool:
        """Fire the tour's abort at once (a client that went away, a stop button)."""
        return self.manager.abort_local(self.tour.id, reason)

    def __await__(self) -> Any:
        return self.task.__await__()


class TourManager:
    def __init__(self, core: Core) -> None:
        self.core = core
        self.running: dict[str, tuple[Tour, asyncio.Task[None]]] = {}
        self.turns = ChatTurns()
        self._poller: asyncio.Task[None] | None = None

    def start(self, request: TourRequest | Tour, *, now: bool = True) -> RunningTour:
        """Start a tour from any channel. A request is checked first (`InvalidInput` for what
        does not fit); a prepared `Tour` starts as it is. A chat with a full queue of tours
        is a `Conflict` (409) at once.

        The tour's first step (its stages up to their first real wait, usually the
        provider's answer) runs before this returns: under load a new task's first step
        waits for a whole pass of the loop, and the first token with it. A channel that
        puts something on the tour its stages read (its save hooks, `tour.data`) starts it
        with `now=False`, puts it there, then calls `RunningTour.step_now()`."""
        if isinstance(request, TourRequest):
            tour = tour_for(request, max_steps=self.core.settings.agent.max_steps)
        else:
            tour = request
        turn = self.turns.enter(tour.chat_id)
        task = eager_task(self._run(tour, turn), name=f"tour:{tour.id}")
        task.add_done_callback(lambda _: self._ended(tour.id, turn))
        self.running[tour.id] = (tour, task)
        if self._poller is None or self._poller.done():
            self._poller = asyncio.create_task(self._poll_aborts(), name="tour-abort-poller")
        running = RunningTour(self, tour, task)
        if now:
            running.step_now()
        return running

    async def _run(self, tour: Tour, turn: Turn) -> None:
        metrics.ACTIVE.inc()
        try:
            await run_tour(self.core, tour, turn=turn)
        finally:
            metrics.ACTIVE.dec()
            self.running.pop(tour.id, None)
            if tour.client_ops:
                await self._drop_relayed(tour.id)

    def _ended(self, tour_id: str, turn: Turn) -> None:
        """However the task ended (even cancelled before it ran): out of the books."""
        self.running.pop(tour_id, None)
        turn.leave()

    async def _drop_relayed(self, tour_id: str) -> None:
        try:
            async with self.core.session() as s:
                await tour_store.drop_answers(s, [tour_id])
        except Exception:  # leftovers are harmless rows
            log.warning("tours.relayed_answers_not_dropped", exc_info=True)

    def abort_local(self, tour_id: str, reason: str = "aborted") -> bool:
        entry = self.running.get(tour_id)
        if entry is None:
            return False
        tour, task = entry
        if tour.abort.is_set():
            # aborting already: one more cancel would land in the abort's own save and end
            # the tour before it told its channel
            return True
        if tour.answered:
            # the answer is complete and being saved: it is saved whole, as it was answered
            # (a client that leaves as its last token arrives has lost nothing)
            return True
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
        """While tours run here: abort requests made through any instance, and client op
        answers posted to another instance, both within ABORT_POLL_SECONDS."""
        broker = self.core.client_ops
        while self.running:
            await sleep_to_next(ABORT_POLL_SECONDS)
            if not self.running:
                break
            try:
                # a lean transaction on SQLite (`store/lean.py`): twice a second while tours
                # run, so its session's own cost falls on every paced token
                flagged, answers = await transact(self.core.db, partial(
                    _requests_here, instance_id=self.core.instance_id, waiting=broker.waiting()))
                for tour_id in flagged:
                    self.abort_local(tour_id, "aborted")
                for answer in answers:
                    broker.resolve(answer.tour_id, answer.call_id, answer.content,
                                   answer.is_error)
            except Exception:  # polling must not die on a transient error
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


async def _requests_here(s: Any, *, instance_id: str, waiting: list[tuple[str, str]]
                         ) -> tuple[list[str], list[Any]]:
    """What the abort poll reads in one transaction: the tours running here that someone asked
    to abort, and the relayed answers to the client ops these tours wait for."""
    return (await tour_store.aborts_requested_here(s, instance_id),
            await tour_store.take_answers(s, waiting))
