"""Coroutines run eagerly: started in the caller's own task, up to their first wait, and
handed to a task only when they have to wait.

On Python 3.11 a new task (or `asyncio.shield` of a coroutine) first runs on the event
loop's next pass, and under load every pass first runs the ready work of every other
request. A write to a socket or the close of a database session usually waits for nothing,
so starting it right where it is called spares that pass; the rare one that does wait is
finished by a task, in order.

Must not: import anything from evacore (every layer may use it), or lose what a coroutine
waits for: the task that takes over waits for exactly the future the coroutine yielded.
"""

from __future__ import annotations

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
