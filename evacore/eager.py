"""Coroutines run eagerly: started in the caller's own task, up to their first wait, and
handed to a task only when they have to wait.

On Python 3.11 a new task (or `asyncio.shield` of a coroutine) first runs on the event
loop's next pass, and under load every pass first runs the ready work of every other
request. A write to a socket or the close of a database session usually waits for nothing,
so starting it right where it is called spares that pass; the rare one that does wait is
finished by a task, in order. A task can start the same way (`eager_task`, `first_step`):
its first step runs in the caller's turn, as the task's own.

Must not: import anything from evacore (every layer may use it), or lose what a coroutine
waits for: the task that takes over waits for exactly the future the coroutine yielded.
"""

from __future__ import annotations

import asyncio
import contextvars
from asyncio.tasks import _enter_task, _leave_task
from collections.abc import Coroutine, Generator
from typing import Any


def run_until_wait(coro: Coroutine[Any, Any, None]) -> Resumed | None:
    """Run `coro` in the calling task up to its first wait: None when it finished (an
    exception it raised comes out here), else what is left of it, for a task to await."""
    try:
        waiting = coro.send(None)
    except StopIteration:
        return None
    return Resumed(coro, waiting)


class Resumed:
    """A coroutine that already ran to its first wait, awaitable from a task: the task
    waits for what it waits for, then goes on driving it."""

    __slots__ = ("coro", "waiting")

    def __init__(self, coro: Coroutine[Any, Any, None], waiting: Any) -> None:
        self.coro, self.waiting = coro, waiting

    def __await__(self) -> Generator[Any, Any, None]:
        coro, waiting = self.coro, self.waiting
        while True:
            try:
                sent = yield waiting
            except BaseException as exc:  # noqa: BLE001 - handed to the coroutine
                try:
                    waiting = coro.throw(exc)
                except StopIteration:
                    return
            else:
                try:
                    waiting = coro.send(sent)
                except StopIteration:
                    return


def eager_task(coro: Coroutine[Any, Any, Any], *, name: str | None = None
               ) -> asyncio.Task[Any]:
    """A task for `coro` whose first step `first_step` runs at once, in the caller's turn of
    the loop (Python 3.12's eager tasks, on 3.11): under load a new task's first step waits
    for a whole pass of the loop. Until `first_step` is called it is an ordinary task that
    starts on the loop's next pass. Inside the first step the task is the current task and
    runs in its own context, so what it starts there (a timeout, a context variable, a
    cancel of itself) belongs to it, as in any later step."""
    context = contextvars.copy_context()
    first = _FirstStep(coro, context)
    return asyncio.get_running_loop().create_task(first, name=name, context=context)


def first_step(task: asyncio.Task[Any]) -> None:
    """Run the first step of a task made by `eager_task` now, up to its coroutine's first
    wait; the task takes over from there. Nothing is done for a task that already ran."""
    first = task.get_coro()
    if not isinstance(first, _FirstStep) or first.state != _NEW or task.done():
        return
    loop = task.get_loop()
    current = asyncio.current_task(loop)
    if current is not None:
        _leave_task(loop, current)
    _enter_task(loop, task)
    try:
        first.context.run(first.run_now)
    finally:
        _leave_task(loop, task)
        if current is not None:
            _enter_task(loop, current)


_NEW, _WAITING, _ENDED, _HANDED = range(4)


class _FirstStep(Coroutine):  # type: ignore[type-arg]
    """The coroutine a task made by `eager_task` drives: its first `send` hands over what an
    eager first step waited for (or how it ended); everything else goes to `coro` as is. A
    task cancelled before it took over throws into `coro` where it waits, as a cancel of a
    waiting task does, and cancels the future it waited for."""

    __slots__ = ("context", "coro", "state", "value")

    def __init__(self, coro: Coroutine[Any, Any, Any], context: contextvars.Context) -> None:
        self.coro, self.context = coro, context
        self.state = _NEW
        self.value: Any = None

    def run_now(self) -> None:
        try:
            self.value = self.coro.send(None)
        except BaseException as exc:  # noqa: BLE001 - its end (StopIteration too) goes to the task
            self.value, self.state = exc, _ENDED
        else:
            self.state = _WAITING

    def send(self, value: Any) -> Any:
        state, self.state = self.state, _HANDED
        if state == _WAITING:
            return self.value
        if state == _ENDED:
            ended, self.value = self.value, None
            raise ended
        return self.coro.send(value)

    def throw(self, exc: Any, *rest: Any) -> Any:  # type: ignore[override]
        state, self.state = self.state, _HANDED
        if state == _WAITING:
            waited, self.value = self.value, None
            if isinstance(exc, asyncio.CancelledError) and isinstance(waited, asyncio.Future):
                waited.cancel()
        elif state == _ENDED:
            self.value = None
            raise exc
        return self.coro.throw(exc, *rest)

    def close(self) -> None:
        self.value = None
        self.coro.close()

    def __await__(self) -> Generator[Any, Any, Any]:
        raise TypeError("run by its task only")
