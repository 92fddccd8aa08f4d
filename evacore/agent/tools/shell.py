"""The `shell` tool: one `/bin/sh -c` command in the workspace, with a timeout and an output cap (R5.2).

Must not: give the command a terminal or stdin, keep more than the output cap in memory,
leave the command's process group running after a timeout, an abort or a cancellation,
or pass the core's own `EVACORE_*` settings (tokens, keys) to the command.
"""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any

from evacore.agent.registry import Tool, ToolContext
from evacore.errors import ToolError

_CHUNK = 65536
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

    async def drain(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(_CHUNK):
            self.feed(chunk)

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


async def _kill_group(proc: asyncio.subprocess.Process, grace: float) -> None:
    """SIGTERM the whole process group, give it `grace` seconds, then SIGKILL what is left."""
    pgid = proc.pid  # start_new_session: the shell leads its own group
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, None)):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        if wait is not None and proc.returncode is None:
            try:
                await asyncio.wait_for(proc.wait(), wait)
            except asyncio.TimeoutError:
                pass
    await proc.wait()


async def _finish(reader: asyncio.Future[None], seconds: float) -> bool:
    """Wait up to `seconds` for the output to end; False if something still holds it open."""
    done, _ = await asyncio.wait({reader}, timeout=seconds)
    return bool(done)


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
    proc = await asyncio.create_subprocess_exec(
        "/bin/sh", "-c", command, cwd=ctx.workspace, env=env, start_new_session=True,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert proc.stdout is not None
    capture = _Capture(settings.shell_output_cap)
    reader = asyncio.ensure_future(capture.drain(proc.stdout))
    exited = asyncio.ensure_future(proc.wait())
    aborted = asyncio.ensure_future(ctx.abort.wait())
    try:
        done, _ = await asyncio.wait({exited, aborted}, timeout=timeout,
                                     return_when=asyncio.FIRST_COMPLETED)
        if exited not in done:
            await _kill_group(proc, settings.shell_kill_grace)
            await _finish(reader, 1.0)
            reason = "aborted" if aborted in done else f"timed out after {timeout:g}s"
            so_far = capture.text()
            raise ToolError(f"{reason}; the command and its child processes were killed"
                            + (f". Output so far:\n{so_far}" if so_far else ""))
        if not await _finish(reader, DRAIN_AFTER_EXIT):
            await _kill_group(proc, settings.shell_kill_grace)
            await _finish(reader, 1.0)
            notes.append("[background processes that kept the output open were stopped; "
                         "redirect their output to keep them running]")
    finally:
        aborted.cancel()
        if proc.returncode is None:
            await _kill_group(proc, settings.shell_kill_grace)
        exited.cancel()
        reader.cancel()
    output = capture.text()
    code = proc.returncode
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
