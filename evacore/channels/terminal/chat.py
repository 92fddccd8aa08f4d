"""The terminal chat (R14.3): open or create a chat, send messages and stream the tours, run
client ops when they are declared, and the slash commands `/regen`, `/swipe`, `/continue`,
`/new`, `/inspect` and `/quit`.

Must not: build prompts or store anything itself; every tour is a generate request of the
API, whether the API is a remote server or served from the local data dir.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import time
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.text import Text

from evacore.channels.terminal.api import Api, ApiError
from evacore.channels.terminal.ops import OpRunner, declarations
from evacore.channels.terminal.reader import NEWLINE_KEY, Reader
from evacore.channels.terminal.render import EventPrinter, footer, inspect_view, prompt_view, short

COMMANDS = {
    "/regen": "a new variant of the last answer (regenerate)",
    "/swipe": "another variant of the last answer (swipe)",
    "/continue": "let the last answer go on",
    "/new": "start a new chat with the same character and connection",
    "/inspect": "the last tour's diagnostics; `/inspect prompt` for the exact requests sent",
    "/help": "this list",
    "/quit": "leave (also Ctrl-D)",
}
MODES = {"/regen": "regenerate", "/swipe": "swipe", "/continue": "continue"}


@dataclass
class TourOutcome:
    """How one tour ended, as the stream told it."""

    tour_id: str | None = None
    status: str = "no answer"
    """`completed`, `failed`, `stopped` (the person pressed Ctrl-C) or `no answer`."""
    content: str = ""
    error: dict[str, Any] | None = None
    done: dict[str, Any] | None = None

    @property
    def completed(self) -> bool:
        return self.status == "completed"


def _find(items: list[dict[str, Any]], wanted: str, what: str) -> dict[str, Any]:
    """The item whose id is `wanted` or whose name matches it case-insensitively."""
    for item in items:
        if item.get("id") == wanted:
            return item
    named = [i for i in items if str(i.get("name", "")).casefold() == wanted.casefold()]
    if len(named) == 1:
        return named[0]
    known = ", ".join(sorted(str(i.get("name")) for i in items)) or "none"
    if named:
        raise ApiError(409, "ambiguous", f"{len(named)} {what}s are named {wanted!r}; give an id")
    raise ApiError(404, "not_found", f"no {what} named {wanted!r}; known: {known}")


@dataclass
class ChatSession:
    api: Api
    reader: Reader
    out: Console
    err: Console
    ops: OpRunner | None = None
    chat: dict[str, Any] = field(default_factory=dict)
    speaker: str = "Assistant"
    last_tour: str | None = None

    async def open(self, chat_id: str | None, character: str | None,
                   connection: str | None) -> None:
        """Use chat `chat_id`, or create one with the character and connection named."""
        connection_id = (_find(await self.api.connections(), connection, "connection")["id"]
                         if connection else None)
        if chat_id:
            self.chat = await self.api.chat(chat_id)
            if connection_id and self.chat.get("connection_id") != connection_id:
                self.chat = await self.api.patch_chat(chat_id, connection_id=connection_id)
        else:
            character_id = (_find(await self.api.characters(), character, "character")["id"]
                            if character else None)
            self.chat = await self.api.create_chat(connection_id=connection_id,
                                                   character_id=character_id,
                                                   title="terminal chat")
        self.speaker = "Assistant"
        if self.chat.get("character_id"):
            self.speaker = str((await self.api.character(self.chat["character_id"]))
                               .get("name") or "Assistant")
        self.err.print(Text(f"chat {self.chat['id']} with {self.speaker} · {self.api.where}",
                            style="dim"))

    async def new_chat(self) -> None:
        self.chat = await self.api.create_chat(connection_id=self.chat.get("connection_id"),
                                               character_id=self.chat.get("character_id"),
                                               title="terminal chat")
        self.last_tour = None
        self.err.print(Text(f"new chat {self.chat['id']}", style="dim"))

    async def generate(self, mode: str = "normal", text: str | None = None) -> TourOutcome:
        """Run one tour and stream it; Ctrl-C in a terminal stops it (the stream is closed,
        which aborts the tour on the server)."""
        task = asyncio.ensure_future(self._stream(mode, text))
        loop = asyncio.get_running_loop()
        watching = False
        if self.reader.interactive:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signal.SIGINT, task.cancel)
                watching = True
        try:
            return await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if not task.cancelled() or (current is not None and current.cancelling()):
                raise  # not Ctrl-C's stop of this answer: the whole chat is being ended
            self.err.print(Text("(stopped)", style="yellow"))
            return TourOutcome(tour_id=self.last_tour, status="stopped")
        finally:
            if watching:
                loop.remove_signal_handler(signal.SIGINT)

    async def _stream(self, mode: str, text: str | None) -> TourOutcome:
        body: dict[str, Any] = {"mode": mode}
        if text is not None:
            # bytes that were no UTF-8 (a pipe, a terminal in another encoding, argv) come
            # as lone surrogates, which no JSON body can carry: each becomes U+FFFD
            try:
                raw = text.encode("utf-8", "surrogateescape")  # the bytes as they came
            except UnicodeEncodeError:  # a surrogate that stood for no byte
                raw = text.encode("utf-8", "surrogatepass")
            text = raw.decode("utf-8", "replace")
            body["message"] = {"content": text}
        if self.ops is not None:
            body["client_ops"] = declarations(self.ops.allowed)
        printer = EventPrinter(self.out, self.err,
                               speaker=self.speaker if self.reader.interactive else None)
        outcome = TourOutcome()
        try:
            async for event in self.api.generate(self.chat["id"], body):
                printer.event(event)
                data = event.data
                if event.name == "tour":
                    outcome.tour_id = self.last_tour = data.get("tour_id")
                elif event.name == "client_op":
                    await self._client_op(data, printer)
                elif event.name == "message":
                    outcome.content = str(data.get("content", ""))
                elif event.name == "error":
                    outcome.status, outcome.error = "failed", data
                elif event.name == "done":
                    outcome.status, outcome.done = "completed", data
        except ApiError as exc:
            printer.finish()
            outcome.status, outcome.error = "failed", {"code": exc.code, "message": exc.message}
            self.err.print(Text(f"error: {exc}", style="bold red"))
        finally:
            printer.finish()
        self.err.print(footer(outcome.tour_id, outcome.status, outcome.done))
        return outcome

    async def _client_op(self, data: dict[str, Any], printer: EventPrinter) -> None:
        assert self.ops is not None
        wait = data.get("timeout")
        deadline = time.monotonic() + wait if isinstance(wait, int | float) and wait > 0 \
            else None
        result = await self.ops.run(str(data.get("name")), data.get("arguments") or {},
                                    deadline)
        accepted = await self.api.answer_op(str(data["tour_id"]), str(data["call_id"]),
                                            result.content, result.error)
        shown = ("error: " if result.error else "") + short(result.content, 120)
        printer.client_op(data, shown if accepted else
                          f"{shown} (too late: the tour no longer waits for this op)")

    async def inspect(self, what: str = "") -> None:
        if not self.last_tour:
            self.err.print("no tour yet in this chat")
            return
        tour = await self.api.tour(self.last_tour)
        self.out.print(prompt_view(tour) if what == "prompt" else inspect_view(tour),
                       soft_wrap=False)

    def help(self) -> None:
        for name, what in COMMANDS.items():
            self.err.print(Text.assemble((f"{name:<10}", "bold"), what))
        self.err.print(f"{NEWLINE_KEY} inserts a new line; Enter sends. "
                       "A message starting with // is sent with one / less.")

    async def command(self, line: str) -> bool:
        """Run one slash command; False when the chat should end."""
        name, _, rest = line.strip().partition(" ")
        if name in ("/quit", "/exit"):
            return False
        if name in MODES:
            await self.generate(MODES[name])
        elif name == "/new":
            await self.new_chat()
        elif name == "/inspect":
            await self.inspect(rest.strip())
        elif name == "/help":
            self.help()
        else:
            self.err.print(Text(f"unknown command {name}; /help lists them", style="red"))
        return True

    async def loop(self) -> None:
        """Read and answer until /quit or the end of the input."""
        if self.reader.interactive:
            self.err.print(Text(f"/help for commands · {NEWLINE_KEY}: new line · "
                                "Ctrl-C stops an answer · Ctrl-D leaves", style="dim"))
        while True:
            line = await self.reader.line()
            if line is None:
                return
            if not line.strip():
                continue
            try:
                if line.startswith("/") and not line.startswith("//"):
                    if not await self.command(line):
                        return
                else:
                    await self.generate("normal", line[1:] if line.startswith("//") else line)
            except ApiError as exc:
                self.err.print(Text(f"error: {exc}", style="bold red"))


def describe_args(name: str, args: dict[str, Any]) -> str:
    """What an op is about to do, for the y/N question."""
    if name == "shell":
        return f"run `{args.get('command')}`"
    if name == "write_file":
        content = str(args.get("content", ""))
        return f"write {len(content.encode())} bytes to {args.get('path')}"
    if name == "read_file":
        return f"read {args.get('path')}"
    if name == "list_dir":
        return f"list {args.get('path') or '.'}"
    return json.dumps(args, ensure_ascii=False)
