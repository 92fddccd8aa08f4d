"""The runner: walks the 14 stages of R2.1 in their fixed order for one tour.

Must not: hold stage logic. The order lives here and only here: stages 1-9 assemble the
prompt once, the agent loop runs stages 10-12 per step, then 13 and 14 finish the tour.
Each stage is timed; each stage's prompt changes are attributed to it in the change log.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from typing import TYPE_CHECKING

from evacore.errors import Aborted, EvacoreError
from evacore.logs import bind_tour, get_logger
from evacore.pipeline import metrics
from evacore.pipeline.reads import end_reads_soon
from evacore.pipeline.stages.base import run_stage
from evacore.pipeline.stages.character import Character
from evacore.pipeline.stages.context_shift import ContextShift
from evacore.pipeline.stages.instruct import Instruct
from evacore.pipeline.stages.interceptors import Interceptors
from evacore.pipeline.stages.lorebook import Lorebook
from evacore.pipeline.stages.macros import Macros
from evacore.pipeline.stages.memory import Memory
from evacore.pipeline.stages.postprocess import PostProcess
from evacore.pipeline.stages.request import Request
from evacore.pipeline.stages.save import Save, save_failure
from evacore.pipeline.stages.serialize import Serialize
from evacore.pipeline.stages.streaming import Streaming
from evacore.pipeline.stages.token_count import TokenCount
from evacore.pipeline.stages.user_input import UserInput
from evacore.pipeline.steps import announce, run_steps

if TYPE_CHECKING:
    from evacore.core import Core
    from evacore.pipeline.stages.base import Stage
    from evacore.pipeline.tour import Tour

log = get_logger(__name__)

ASSEMBLE: tuple[Stage, ...] = (
    UserInput(), Macros(), Character(), Lorebook(), Memory(), TokenCount(), ContextShift(),
    Interceptors(), Instruct(),
)
STEP: tuple[Stage, ...] = (Serialize(), Request(), Streaming())
FINISH: tuple[Stage, ...] = (PostProcess(), Save())
STAGES: tuple[Stage, ...] = ASSEMBLE + STEP + FINISH
READERS = 5
"""Stages 2 to 5 (up to memory) read through the tour's shared read session (reads.py): it
is ended after them, before the stages that may wait on plugins."""
TURN_WAIT_SHOWN = 0.0001
"""A wait for the chat's turn this long or longer is in the tour's diagnostics
(`turn_wait_ms`): its chat's earlier tour was still running when it came."""


async def run_tour(core: Core, tour: Tour,
                   turn: AbstractAsyncContextManager[None] | None = None) -> None:
    """Run one tour to its end; never raises for the tour's own failures (they are saved).
    `turn`: the chat's turn (chat_turns.py), waited for before stage 1 and held until the
    tour's end is saved, a failure's included."""
    async with AsyncExitStack() as held:
        await _run(core, tour, held, turn)


async def _run(core: Core, tour: Tour, held: AsyncExitStack,
               turn: AbstractAsyncContextManager[None] | None) -> None:
    with bind_tour(tour.id, tour.chat_id):
        tour.diagnostics["seed"] = tour.seed
        if tour.env_overrides:
            tour.diagnostics["env_overrides"] = dict(tour.env_overrides)
        started = False
        try:
            if turn is not None:
                queued = time.perf_counter()
                await held.enter_async_context(turn)  # a cancel here: aborted, nothing stored
                behind = time.perf_counter() - queued
                if behind >= TURN_WAIT_SHOWN:  # the chat's earlier tour was still running
                    tour.diagnostics["turn_wait_ms"] = round(behind * 1000, 3)
            # from the request to stage 1: the tour's task starting, the chat's turn
            tour.diagnostics["waited_ms"] = round((time.perf_counter() - tour.started) * 1000, 3)
            await run_stage(core, tour, ASSEMBLE[0])
            started = True
            tour.diagnostics["env"] = dict(tour.env)  # as stage 1 completed it (`picture`)
            try:
                for stage in ASSEMBLE[1:READERS]:
                    _check_abort(tour)
                    await run_stage(core, tour, stage)
            finally:
                end_reads_soon(tour)  # ends when this task first waits
            for stage in ASSEMBLE[READERS:]:
                _check_abort(tour)
                await run_stage(core, tour, stage)
            tour.assembled()
            await run_steps(core, tour, STEP)
            tour.answered = True  # an abort from now on comes too late to cut anything
            # The answer's end and its save are two passes of the event loop, not one: the
            # work ready meanwhile (other tours' tokens and first steps) runs between them
            # instead of behind the whole of both (their time to first token under load)
            await asyncio.sleep(0)
            for stage in FINISH:
                await run_stage(core, tour, stage)
            log.info("tour.completed", finish_reason=tour.finish_reason, steps=len(tour.steps))
        except (asyncio.CancelledError, Aborted) as exc:
            ours = tour.abort.is_set()
            tour.abort.fire("cancelled")
            err = Aborted(f"the tour was aborted ({tour.abort.reason})")
            if started:
                await asyncio.shield(save_failure(core, tour, "aborted", err))
            else:
                tour.status, tour.error = "aborted", {"code": err.code, "message": err.message}
            if started:
                announce(tour, held=False)
            tour.events.emit("error", {"code": err.code, "message": err.message})
            if isinstance(exc, asyncio.CancelledError):
                task = asyncio.current_task()
                if ours and task is not None and task.cancelling():
                    task.uncancel()
                else:
                    raise
        except EvacoreError as exc:
            log.warning("tour.failed", code=exc.code, error=exc.message)
            if started:
                await save_failure(core, tour, "failed", exc)
            else:
                tour.error = {"code": exc.code, "message": exc.message}
                tour.status = "failed"
            if started:
                announce(tour, held=False)
            tour.events.emit("error", {"code": exc.code, "message": exc.message})
        except Exception as exc:
            log.exception("tour.crashed")
            err = EvacoreError(f"internal error: {type(exc).__name__}")
            if started:
                await save_failure(core, tour, "failed", err)
            else:
                tour.error, tour.status = {"code": err.code, "message": err.message}, "failed"
            if started:
                announce(tour, held=False)
            tour.events.emit("error", {"code": "internal", "message": err.message})
        finally:
            core.client_ops.cancel_tour(tour.id)
            # The tour's tools refer back to it (their services hold the tour): let them
            # go, so that reference counting frees a finished tour at once instead of a
            # full pass of the garbage collector, which walks every live object.
            tour.data.pop("tools", None)
            # So do a channel's save hooks (the facade's refers to its answer, which holds
            # the tour): the tour has saved, or will never save, by now
            tour.save_hooks.clear()
            metrics.record(tour)
            tour.events.close()


def _check_abort(tour: Tour) -> None:
    if tour.abort.is_set():
        raise Aborted(f"the tour was aborted ({tour.abort.reason})")
