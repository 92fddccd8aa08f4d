"""Where the terminal chat's input comes from: a real terminal (prompt_toolkit: line editing,
history kept in the data dir, Alt+Enter for a new line) or a pipe (a script's lines).

Must not: interpret what is read (commands are chat.py's job) or write to stdout; questions
for the person go to stderr, so a script that captures stdout gets answers only.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from pathlib import Path
from typing import IO, Protocol

from rich.console import Console
from rich.text import Text

YES = ("y", "yes")
NEWLINE_KEY = "Alt+Enter (or Esc then Enter)"


def visible(text: str) -> str:
    """`text` with its control characters written out (`\x1b`): a question built from what
    the model sent must not move the cursor or erase the line it is asked on."""
    return "".join(c if c.isprintable() or c == " " else c.encode("unicode_escape").decode()
                   for c in text)


async def _read_line(stream: IO[str]) -> str:
    """`stream.readline()` in a daemon thread of its own: a chat ended while it waits for a
    line (a signal, see launch.py) leaves at once, where a thread of the loop's executor
    would hold the process until the line came."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[str] = loop.create_future()

    def settle(text: str | None, exc: BaseException | None) -> None:
        if done.done():
            return
        if exc is not None:
            done.set_exception(exc)
        else:
            done.set_result(text or "")

    def read() -> None:
        text, exc = None, None
        try:
            text = stream.readline()
        except BaseException as error:  # noqa: BLE001 - handed to the waiting coroutine
            exc = error
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
            loop.call_soon_threadsafe(settle, text, exc)

    threading.Thread(target=read, name="evacore-stdin", daemon=True).start()
    return await done


class Reader(Protocol):
    interactive: bool

    async def line(self) -> str | None:
        """The next message or command; "" for nothing; None at the end of the input."""

    async def ask(self, question: str) -> bool:
        """A y/N question; anything but y/yes (or the end of the input) is no."""


class PipeReader:
    """Lines from a pipe or file. A line ending in a backslash continues on the next line."""

    interactive = False

    def __init__(self, err: Console, stream: IO[str] | None = None) -> None:
        self.err = err
        self.stream = stream if stream is not None else sys.stdin

    async def _raw(self) -> str | None:
        text = await _read_line(self.stream)
        return None if text == "" else text.rstrip("\r\n")

    async def line(self) -> str | None:
        first = await self._raw()
        if first is None:
            return None
        parts = [first]
        while parts[-1].endswith("\\"):
            parts[-1] = parts[-1][:-1]
            more = await self._raw()
            if more is None:
                break
            parts.append(more)
        return "\n".join(parts)

    async def ask(self, question: str) -> bool:
        self.err.print(Text(f"{visible(question)} [y/N] ", style="bold yellow"), end="")
        answer = await self._raw()
        self.err.print(answer if answer is not None else "(end of input: no)", markup=False)
        return (answer or "").strip().lower() in YES


class TerminalReader:
    """prompt_toolkit in a terminal: Enter sends, Alt+Enter inserts a new line, ↑/↓ walk the
    history (kept in `history_file`), Ctrl-C clears the line, Ctrl-D ends the chat."""

    interactive = True

    def __init__(self, history_file: Path, prompt: str = "you › ") -> None:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import FileHistory
        from prompt_toolkit.key_binding import KeyBindings

        keys = KeyBindings()

        @keys.add("escape", "enter")
        def _newline(event: object) -> None:
            event.current_buffer.insert_text("\n")  # type: ignore[attr-defined]

        history_file.parent.mkdir(parents=True, exist_ok=True)
        self._session: PromptSession[str] = PromptSession(
            history=FileHistory(str(history_file)), key_bindings=keys, multiline=False,
            prompt_continuation=lambda width, line, wrap: "… ".rjust(width))
        self._ask: PromptSession[str] = PromptSession()
        self._prompt = prompt

    async def line(self) -> str | None:
        try:
            return await self._session.prompt_async(self._prompt)
        except KeyboardInterrupt:
            return ""
        except EOFError:
            return None

    async def ask(self, question: str) -> bool:
        try:
            # the terminal is raw while it asks: Ctrl-C is a key here (no), and prompt_toolkit
            # must leave the signal alone, or it takes the chat's Ctrl-C handler with it
            answer = await self._ask.prompt_async(f"{visible(question)} [y/N] ",
                                                  handle_sigint=False)
        except (KeyboardInterrupt, EOFError):
            return False
        return answer.strip().lower() in YES
