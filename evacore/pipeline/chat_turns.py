"""Per-chat turns on this instance: tours of one chat run one at a time, in arrival order.

A chat's history is a sequence: a user message, then its answer. Two tours of one chat at
once would store their messages interleaved and answer each from a prompt without the
other's message. Here a tour waits for its chat's turn before stage 1 and holds it until its
save (or its failure's save) is done; tours of different chats never wait for each other.
Across instances on one database, stage 1 waits for tours of the chat running elsewhere
(user_input.py), under the chat's row lock.

Must not: touch the database or know what a tour does while it holds the turn.
"""

from __future__ import annotations

import asyncio

from evacore.errors import ChatBusy

MAX_WAITING = 16
"""Tours that may wait behind a chat's running tour; one more is refused (409 `chat_busy`)."""


class ChatTurns:
    def __init__(self, max_waiting: int = MAX_WAITING) -> None:
        self.max_waiting = max_waiting
        self._locks: dict[str, asyncio.Lock] = {}
        self._holders: dict[str, int] = {}  # tours of the chat that hold or wait for it

    def queued(self, chat_id: str) -> int:
        """Tours of the chat that run or wait here."""
        return self._holders.get(chat_id, 0)

    def enter(self, chat_id: str) -> Turn:
        """A place in the chat's queue, taken at once (a full queue is `ChatBusy`, 409);
        the tour waits for it with `async with`, and leaves it when it ends."""
        if self.queued(chat_id) > self.max_waiting:
            raise ChatBusy(f"chat {chat_id} already has {self.queued(chat_id)} tours running "
                           "or waiting; try again when they are done")
        lock = self._locks.get(chat_id)
        if lock is None:
            lock = self._locks[chat_id] = asyncio.Lock()
        self._holders[chat_id] = self.queued(chat_id) + 1
        return Turn(self, chat_id, lock)

    def _leave(self, chat_id: str) -> None:
        left = self._holders[chat_id] - 1
        if left:
            self._holders[chat_id] = left
        else:
            del self._holders[chat_id]
            del self._locks[chat_id]


class Turn:
    """One tour's place in its chat's queue (FIFO: asyncio's lock wakes waiters in order). A
    waiter cancelled (its client left, its abort fired) leaves without touching the chat."""

    def __init__(self, turns: ChatTurns, chat_id: str, lock: asyncio.Lock) -> None:
        self._turns, self.chat_id, self._lock = turns, chat_id, lock
        self._held = self._left = False

    async def __aenter__(self) -> None:
        await self._lock.acquire()
        self._held = True

    async def __aexit__(self, *exc: object) -> None:
        self.leave()

    def leave(self) -> None:
        """Give the place up (idempotent; also for a tour that never started running)."""
        if self._held:
            self._held = False
            self._lock.release()
        if not self._left:
            self._left = True
            self._turns._leave(self.chat_id)
