"""A task started eagerly (`evacore.eager.eager_task` + `first_step`): its first step runs in
the caller's turn of the loop, as the task itself (current task, own context), and from its
first wait on it is an ordinary task: results, errors, cancels and timeouts land as they
would on any task."""

from __future__ import annotations

import asyncio
import contextvars

import pytest

from evacore.eager import eager_task, first_step

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="caller")


async def test_the_first_step_runs_at_once_as_the_task_itself() -> None:
    seen: list[object] = []
    gate = asyncio.get_running_loop().create_future()

    async def work() -> str:
        seen.append(asyncio.current_task())
        VAR.set("task")
        await gate
        seen.append(asyncio.current_task())
        return VAR.get()

    caller = asyncio.current_task()
    task = eager_task(work(), name="eager")
    assert seen == []  # made, not run
    first_step(task)
    assert seen == [task]  # ran in this turn, as the task
    assert asyncio.current_task() is caller and VAR.get() == "caller"  # nothing leaked
    gate.set_result(None)
    assert await task == "task"
    assert seen == [task, task]


async def test_a_task_that_ends_in_its_first_step_ends_as_it_would() -> None:
    async def quick() -> int:
        return 7

    async def failing() -> None:
        raise ValueError("no")

    done = eager_task(quick())
    first_step(done)
    assert await done == 7
    failed = eager_task(failing())
    first_step(failed)
    with pytest.raises(ValueError, match="no"):
        await failed


async def test_a_cancel_before_the_task_took_over_reaches_the_waiting_coroutine() -> None:
    waited = asyncio.get_running_loop().create_future()
    cleaned: list[str] = []

    async def work() -> None:
        try:
            await waited
        except asyncio.CancelledError:
            cleaned.append("cancelled where it waited")
            raise

    task = eager_task(work())
    first_step(task)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cleaned == ["cancelled where it waited"]
    assert waited.cancelled()  # what it waited for is cancelled too, as for any task


async def test_a_timeout_entered_in_the_first_step_belongs_to_the_task() -> None:
    async def slow() -> str:
        try:
            async with asyncio.timeout(0.01):
                await asyncio.sleep(10)
        except TimeoutError:
            return "timed out"
        return "not timed out"

    task = eager_task(slow())
    first_step(task)
    await asyncio.sleep(0.05)  # the caller is not the one cancelled
    assert await task == "timed out"


async def test_without_its_first_step_it_is_an_ordinary_task() -> None:
    ran: list[bool] = []

    async def work() -> None:
        ran.append(True)

    task = eager_task(work())
    await task
    assert ran == [True]
    first_step(task)  # nothing to do any more
    assert ran == [True]
