"""Puts a terminal chat together from its options: the API (remote, or served from the local
data dir), the input (terminal or pipe), the client ops, then one message or the loop.

Must not: parse command-line arguments (cli/chat.py does), talk HTTP itself (api.py does) or
start a core (the CLI hands in `local_api` for embedded mode).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from evacore.channels.terminal.api import Api, ApiError, remote_api
from evacore.channels.terminal.chat import ChatSession, describe_args
from evacore.channels.terminal.ops import DEFAULT_OPS, SHELL_TIMEOUT, OpRunner
from evacore.channels.terminal.reader import PipeReader, Reader, TerminalReader
from evacore.channels.terminal.render import consoles
from evacore.config import Settings

EXIT_OK, EXIT_TOUR_FAILED, EXIT_SETUP = 0, 1, 2
HISTORY_FILE = "terminal_history"


@dataclass
class TerminalOptions:
    url: str | None = None
    token: str | None = None
    chat_id: str | None = None
    character: str | None = None
    connection: str | None = None
    message: str | None = None
    root: Path | None = None
    """With a root, the client ops in `allow` are declared and run inside it."""
    allow: tuple[str, ...] = field(default=DEFAULT_OPS)
    yes: bool = False
    shell_timeout: float = SHELL_TIMEOUT
    output_cap: int = 100_000


def pick_reader(settings: Settings, err: Console) -> Reader:
    if sys.stdin.isatty() and sys.stdout.isatty():
        return TerminalReader(settings.data_dir / HISTORY_FILE)
    return PipeReader(err)


LocalApi = Callable[..., AbstractAsyncContextManager[Api]]
"""`local_api(settings, on_bootstrap=…)`: an Api served from the local data dir (embedded mode)."""


@contextlib.asynccontextmanager
async def open_api(options: TerminalOptions, settings: Settings, err: Console,
                   local_api: LocalApi | None) -> AsyncIterator[Api]:
    if options.url:
        api = remote_api(options.url, options.token or "")
        try:
            yield api
        finally:
            await api.http.aclose()
        return
    if local_api is None:
        raise ApiError(0, "no_server", "give --url: this command needs a running server")

    def announce(token: str) -> None:
        err.print(f"created the master token (shown once, store it now): {token}",
                  markup=False)

    async with local_api(settings, on_bootstrap=announce) as api:
        yield api


async def run_terminal(options: TerminalOptions, settings: Settings, *,
                       local_api: LocalApi | None = None) -> int:
    """Run `evacore chat` / `evacore client`; returns the exit code. Without `options.url`
    the chat runs on `local_api`."""
    out, err = consoles()
    reader = pick_reader(settings, err)
    ops = None
    if options.root is not None:
        async def confirm(name: str, args: dict[str, Any]) -> bool:
            return await reader.ask(f"{name} on this machine: {describe_args(name, args)}?")

        ops = OpRunner(options.root, options.allow, confirm=None if options.yes else confirm,
                       shell_timeout=options.shell_timeout, output_cap=options.output_cap)
    with _ended_by_signals() as ended:
        try:
            return await _run(options, settings, local_api, reader, ops, out, err)
        except asyncio.CancelledError:
            if ended.signum is None:
                raise
            # ended from outside: the op that ran was killed, the stream closed (the server
            # aborts the tour), the embedded server and its run token are gone
            return 128 + ended.signum


class _Ending:
    signum: int | None = None


@contextlib.contextmanager
def _ended_by_signals() -> Iterator[_Ending]:
    """While it lasts, SIGTERM and SIGHUP (a `kill`, a closed terminal window) cancel the
    calling task, so that everything it opened is closed on the way out; without this the
    process would die at once, leaving a shell op running, an embedded server's socket
    folder and its run token behind."""
    ended = _Ending()
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    watched: list[int] = []

    def end(signum: int) -> None:
        if ended.signum is None and task is not None:
            ended.signum = signum
            task.cancel()

    for signum in (signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signum, end, signum)
            watched.append(signum)
    try:
        yield ended
    finally:
        for signum in watched:
            loop.remove_signal_handler(signum)


async def _run(options: TerminalOptions, settings: Settings, local_api: LocalApi | None,
               reader: Reader, ops: OpRunner | None, out: Console, err: Console) -> int:
    try:
        async with open_api(options, settings, err, local_api) as api:
            session = ChatSession(api, reader, out, err, ops=ops)
            try:
                await session.open(options.chat_id, options.character, options.connection)
            except ApiError as exc:
                err.print(Text(f"error: {exc}", style="bold red"))
                return EXIT_SETUP
            if options.message is not None:
                outcome = await session.generate("normal", options.message)
                return EXIT_OK if outcome.completed else EXIT_TOUR_FAILED
            await session.loop()
            return EXIT_OK
    except ApiError as exc:
        err.print(Text(f"error: {exc}", style="bold red"))
        return EXIT_SETUP
