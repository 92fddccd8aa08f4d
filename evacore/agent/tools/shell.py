"""The `shell` tool: one `/bin/sh -c` command in the workspace, with a timeout and an output cap (R5.2).

The command is spawned by the standard library (`subprocess.Popen`, which closes every
descriptor but the command's own three in the child), not by the event loop: uvloop's
spawn (libuv) lets the child inherit the loop's descriptors, among them copies of the
output pipe, so a background job that redirected its output would still hold the pipe
and be stopped as if it had not. The output is read through the loop; the exit is seen
through a pidfd (or a waiting thread where there is none).

Must not: give the command a terminal, stdin or any descriptor of the core's, keep more
than the output cap in memory, leave the command's process group running after a
timeout, an abort or a cancellation, or pass the core's own `EVACORE_*` settings
(tokens, keys) to the command.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from typing import Any

from evacore.agent.registry import Tool, ToolContext, workspace_relative
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


class _ShellProtocol(asyncio.Protocol):
    """Feeds the command's output into the capture; tells when the shell exited and when the
    output closed (with background children these are different moments)."""

    def __init__(self, capture: _Capture) -> None:
        self.capture = capture
        self.exited = asyncio.Event()
        self.output_closed = asyncio.Event()

    def data_received(self, data: bytes) -> None:
        self.capture.feed(data)

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.output_closed.set()


class _Shell:
    """One running `/bin/sh -c`: the process, its output transport and its exit watch."""

    def __init__(self, proc: subprocess.Popen[bytes], proto: _ShellProtocol,
                 output: asyncio.ReadTransport) -> None:
        self.proc = proc
        self.proto = proto
        self.output = output
        self._pidfd: int | None = None
        self._waiter: asyncio.Future[Any] | None = None
        loop = asyncio.get_running_loop()
        try:
            self._pidfd = os.pidfd_open(proc.pid)
            loop.add_reader(self._pidfd, self._reap)
        except (AttributeError, OSError):  # no pidfd here: a thread waits instead
            self._waiter = asyncio.ensure_future(asyncio.to_thread(proc.wait))
            self._waiter.add_done_callback(lambda _: proto.exited.set())

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    def _reap(self) -> None:
        self.proc.poll()
        if self.proc.returncode is not None:
            self._stop_watch()
            self.proto.exited.set()

    def _stop_watch(self) -> None:
        if self._pidfd is not None:
            asyncio.get_running_loop().remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None

    def close(self) -> None:
        self._stop_watch()
        self.output.close()


async def _spawn(command: str, ctx: ToolContext, env: dict[str, str],
                 capture: _Capture) -> _Shell:
    """Start the command in its own session, its output (stdout and stderr) on a fresh pipe,
    every other descriptor closed in the child."""
    read_end, write_end = os.pipe()  # both close-on-exec; Popen dups the write end to 1 and 2
    try:
        proc = subprocess.Popen(  # noqa: ASYNC220 - a vfork+exec, as asyncio spawns on the loop too
            ["/bin/sh", "-c", command], cwd=ctx.workspace, env=env, stdin=subprocess.DEVNULL,
            stdout=write_end, stderr=subprocess.STDOUT, close_fds=True, start_new_session=True,
        )
    except OSError as exc:
        os.close(read_end)
        raise ToolError("could not start /bin/sh: "
                        + workspace_relative(str(exc), ctx.workspace)) from None
    finally:
        os.close(write_end)
    proto = _ShellProtocol(capture)
    try:
        output, _ = await asyncio.get_running_loop().connect_read_pipe(
            lambda: proto, os.fdopen(read_end, "rb", buffering=0))
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        await asyncio.to_thread(proc.wait)
        raise
    return _Shell(proc, proto, output)


async def _within(event: asyncio.Event, seconds: float | None) -> bool:
    try:
        await asyncio.wait_for(event.wait(), seconds)
    except TimeoutError:
        return False
    return True


async def _kill_group(sh: _Shell, grace: float) -> None:
    """SIGTERM the whole process group, give it `grace` seconds, then SIGKILL what is left."""
    proto = sh.proto
    pgid = sh.pid  # start_new_session: the shell leads its own group
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
    try:
        await asyncio.to_thread(os.makedirs, ctx.workspace, exist_ok=True)
    except OSError as exc:
        raise ToolError("the workspace folder cannot be created: "
                        + (exc.strerror or type(exc).__name__)) from None
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVACORE_")}
    capture = _Capture(settings.shell_output_cap)
    sh = await _spawn(command, ctx, env, capture)
    proto = sh.proto
    exited = asyncio.ensure_future(proto.exited.wait())
    aborted = asyncio.ensure_future(ctx.abort.wait())
    try:
        done, _ = await asyncio.wait({exited, aborted}, timeout=timeout,
                                     return_when=asyncio.FIRST_COMPLETED)
        if exited not in done:
            await _kill_group(sh, settings.shell_kill_grace)
            reason = "aborted" if aborted in done else f"timed out after {timeout:g}s"
            so_far = capture.text()
            raise ToolError(f"{reason}; the command and its child processes were killed"
                            + (f". Output so far:\n{so_far}" if so_far else ""))
        if not await _within(proto.output_closed, DRAIN_AFTER_EXIT):
            await _kill_group(sh, settings.shell_kill_grace)
            notes.append("[background processes that kept the output open were stopped; "
                         "redirect their output to keep them running]")
    finally:
        aborted.cancel()
        exited.cancel()
        if sh.returncode is None or not proto.output_closed.is_set():
            await _kill_group(sh, settings.shell_kill_grace)
        sh.close()
    output = capture.text()
    code = sh.returncode
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
