"""The `shell` tool: one `/bin/sh -c` command in the workspace, with a timeout and an output cap (R5.2).

Must not: give the command a terminal or stdin, keep more than the output cap in memory,
leave the command's process group running after a timeout, an abort or a cancellation,
or pass the core's own `EVACORE_*` settings (tokens, keys) to the command.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from typing import Any

from evacore.agent.registry import Tool, ToolContext
from evacore.errors import ToolError

DRAIN_AFTER_EXIT = 0.5
"""Seconds to keep reading after the shell exits, while background processes hold the output."""


class _Capture:
    """Keeps the first and the last part of a stream within a byte cap; counts what it drops."""

    def __init__(self, cap: int) -> None:
        self.tail_cap = cap // 2
        self.head_cap = cap - self.tail_cap
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def feed(self, chunk: bytes) -> None:
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        self.tail += chunk
        excess = len(self.tail) - self.tail_cap
        if excess > 0:
            del self.tail[:excess]
            self.dropped += excess

    def text(self) -> str:
        if not self.dropped:
            return bytes(self.head + self.tail).decode("utf-8", errors="replace")
        tail = bytes(self.tail)
        skip = 0
        while skip < min(3, len(tail)) and 0x80 <= tail[skip] < 0xC0:
            skip += 1  # do not start the tail in the middle of a UTF-8 character
        return (bytes(self.head).decode("utf-8", errors="replace")
                + f"\n[… {self.dropped + skip} bytes of output dropped …]\n"
                + tail[skip:].decode("utf-8", errors="replace"))


class _ShellProtocol(asyncio.SubprocessProtocol):
    """Feeds the command's output into the capture; tells when the shell exited and when the
    output closed (with background children these are different moments)."""

    def __init__(self, capture: _Capture) -> None:
        self.capture = capture
        self.exited = asyncio.Event()
        self.output_closed = asyncio.Event()

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        self.capture.feed(data.encode() if isinstance(data, str) else data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self.output_closed.set()

    def process_exited(self) -> None:
        self.exited.set()


async def _within(event: asyncio.Event, seconds: float | None) -> bool:
    try:
        await asyncio.wait_for(event.wait(), seconds)
    except TimeoutError:
        return False
    return True


async def _kill_group(transport: asyncio.SubprocessTransport, proto: _ShellProtocol,
                      grace: float) -> None:
    """SIGTERM the whole process group, give it `grace` seconds, then SIGKILL what is left."""
    pgid = transport.get_pid()  # start_new_session: the shell leads its own group
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        if sig == signal.SIGTERM:
            await _within(proto.exited, grace)
            await _within(proto.output_closed, max(0.0, grace))  # children holding the output
    await _within(proto.exited, 5.0)
    await _within(proto.output_closed, 1.0)


async def shell(args: dict[str, Any], ctx: ToolContext) -> str:
    settings = ctx.settings
    command: str = args["command"]
    timeout = args.get("timeout", settings.shell_timeout)
    if timeout <= 0:
        raise ToolError("timeout must be a positive number of seconds")
    notes: list[str] = []
    if timeout > settings.shell_max_timeout:
        timeout = settings.shell_max_timeout
        notes.append(f"[timeout lowered to the maximum, {timeout:g}s]")
    await asyncio.to_thread(os.makedirs, ctx.workspace, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVACORE_")}
    capture = _Capture(settings.shell_output_cap)
    transport, proto = await asyncio.get_running_loop().subprocess_exec(
        lambda: _ShellProtocol(capture), "/bin/sh", "-c", command, cwd=ctx.workspace, env=env,
        start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    exited = asyncio.ensure_future(proto.exited.wait())
    aborted = asyncio.ensure_future(ctx.abort.wait())
    try:
        done, _ = await asyncio.wait({exited, aborted}, timeout=timeout,
                                     return_when=asyncio.FIRST_COMPLETED)
        if exited not in done:
            await _kill_group(transport, proto, settings.shell_kill_grace)
            reason = "aborted" if aborted in done else f"timed out after {timeout:g}s"
            so_far = capture.text()
            raise ToolError(f"{reason}; the command and its child processes were killed"
                            + (f". Output so far:\n{so_far}" if so_far else ""))
        if not await _within(proto.output_closed, DRAIN_AFTER_EXIT):
            await _kill_group(transport, proto, settings.shell_kill_grace)
            notes.append("[background processes that kept the output open were stopped; "
                         "redirect their output to keep them running]")
    finally:
        aborted.cancel()
        exited.cancel()
        if transport.get_returncode() is None or not proto.output_closed.is_set():
            await _kill_group(transport, proto, settings.shell_kill_grace)
        transport.close()
    output = capture.text()
    code = transport.get_returncode()
    if code:
        notes.insert(0, f"[exit {code}]" if code > 0 else f"[killed by signal {-code}]")
    if notes:
        output += ("\n" if output and not output.endswith("\n") else "") + "\n".join(notes)
    return output


def shell_tool() -> Tool:
    """The `shell` tool, master only by default."""
    return Tool(
        name="shell",
        description=(
            "Run a command with /bin/sh -c in the workspace folder on the core's machine. No "
            "terminal and no input. Returns stdout and stderr together as written; a non-zero "
            "exit is shown as [exit N]. On timeout the command and its children are killed."),
        parameters={"type": "object", "properties": {
            "command": {"type": "string", "description": "The shell command line."},
            "timeout": {"type": "number", "description": "Seconds before it is killed."},
        }, "required": ["command"]},
        handler=shell, roles=frozenset({"master"}), kind="machine", timeout=None,
    )
