"""R5.2: the shell tool runs in the workspace with a timeout and an output cap, and leaves
no process behind; a detached background job keeps running. Every test runs on asyncio's
loop and on uvloop's (the loop `evacore serve` runs on)."""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path

import pytest

from evacore.agent.registry import run_tool
from evacore.agent.tools import default_registry

# tests/agent_tools/conftest.py runs every test here on both loops (asyncio, uvloop)


def running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def live_members(pgid: int) -> list[int]:
    """Processes of a process group that are still running (zombies do not count)."""
    alive = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        state, group = fields[0], int(fields[2])
        if group == pgid and state not in ("Z", "X"):
            alive.append(int(entry))
    return alive


async def survivors(pgid: int) -> list[int]:
    """Members of the group still running after a short moment (a killed process needs a few
    milliseconds between closing its files and becoming a zombie)."""
    for _ in range(50):
        alive = live_members(pgid)
        if not alive:
            return []
        await asyncio.sleep(0.02)
    return alive


async def started(pid_file: Path) -> None:
    """Wait (bounded) until the command has written its process group id."""
    for _ in range(200):
        if pid_file.exists() and pid_file.read_text().strip():
            await asyncio.sleep(0.05)  # let the background child start too
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the command did not start")


def sleeps_of(pids: list[int]) -> list[int]:
    """The `sleep` processes among `pids`."""
    found = []
    for pid in pids:
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == "sleep":
                found.append(pid)
        except OSError:
            continue
    return found


async def running_group(pid_file: Path, task: asyncio.Task) -> tuple[int, list[int]]:
    """Once the command has written its group id: its two `sleep` processes, seen running
    while the call is still going (proof the processes about to be killed were there)."""
    await started(pid_file)
    pgid = int(pid_file.read_text().split()[0])
    sleeping = sleeps_of(live_members(pgid))
    for _ in range(200):  # the foreground sleep may need a moment on a busy machine
        if len(sleeping) >= 2:
            break
        await asyncio.sleep(0.01)
        sleeping = sleeps_of(live_members(pgid))
    assert not task.done(), "the call ended before its processes were seen running"
    assert len(sleeping) == 2, f"both sleeps of group {pgid} should run, saw {sleeping}"
    assert all(running(pid) for pid in sleeping)
    return pgid, sleeping


async def shell(ctx, command: str, **extra: object) -> tuple[str, bool]:
    outcome = await run_tool(default_registry(), "shell", json.dumps({"command": command, **extra}),
                             ctx)
    return outcome.output, outcome.error


async def test_r5_2_shell_runs_in_the_workspace(make_ctx, workspace: Path) -> None:
    output, error = await shell(make_ctx(), "pwd; echo out; echo err >&2")
    assert not error
    assert output == f"{os.path.realpath(workspace)}\nout\nerr\n"


async def test_r5_2_shell_reports_a_nonzero_exit(make_ctx) -> None:
    assert await shell(make_ctx(), "echo nope; exit 3") == ("nope\n[exit 3]", False)
    assert await shell(make_ctx(), "exit 1") == ("[exit 1]", False)
    assert await shell(make_ctx(), "true") == ("", False)


async def test_r5_2_shell_has_no_stdin_and_no_core_secrets(make_ctx, monkeypatch) -> None:
    monkeypatch.setenv("EVACORE_MASTER_TOKEN", "s3cret")
    output, _ = await shell(make_ctx(), "cat; echo \"[${EVACORE_MASTER_TOKEN:-unset}]\"; tty")
    assert output.startswith("[unset]\nnot a tty\n")


async def test_r5_2_huge_output_is_capped_while_read(make_ctx) -> None:
    command = "head -c 3000000 /dev/zero | tr '\\0' a; echo; echo THE-END"
    output, error = await shell(make_ctx(shell_output_cap=10_000), command)
    assert not error
    head, note, tail = re.split(r"\n(\[… \d+ bytes of output dropped …\])\n", output)
    assert head == "a" * 5000
    assert tail.endswith("a\nTHE-END\n") and len(tail) == 5000
    assert note == f"[… {3000009 - 10000} bytes of output dropped …]"


async def test_r5_2_hanging_shell_is_killed_with_its_children(make_ctx, workspace: Path) -> None:
    ctx = make_ctx(shell_kill_grace=0.2)
    task = asyncio.create_task(shell(ctx, "echo $$ | tee pgid; sleep 100 & sleep 100",
                                     timeout=1.5))
    pgid, alive = await running_group(workspace / "pgid", task)
    output, error = await asyncio.wait_for(task, 10)
    assert error
    assert output.startswith("error: timed out after 1.5s; the command and its child processes "
                             "were killed. Output so far:\n")
    assert int(output.rsplit("\n", 2)[-2]) == pgid
    assert await survivors(pgid) == []
    assert not any(running(pid) for pid in alive)


async def test_r5_2_children_ignoring_sigterm_are_killed_too(make_ctx, workspace: Path) -> None:
    ctx = make_ctx(shell_kill_grace=0.2)
    task = asyncio.create_task(shell(
        ctx, "echo $$ | tee pgid; trap '' TERM; sleep 100 & sleep 100", timeout=1.5))
    pgid, alive = await running_group(workspace / "pgid", task)
    output, error = await asyncio.wait_for(task, 10)
    assert error and int(output.rsplit("\n", 2)[-2]) == pgid
    assert await survivors(pgid) == []
    assert not any(running(pid) for pid in alive)


async def test_r5_2_abort_kills_the_shell(make_ctx, workspace: Path) -> None:
    ctx = make_ctx(shell_kill_grace=0.2)
    task = asyncio.create_task(shell(ctx, "echo $$ > pgid; sleep 100 & sleep 100", timeout=60))
    pgid, alive = await running_group(workspace / "pgid", task)
    ctx.abort.set()
    output, error = await asyncio.wait_for(task, 5)
    assert error and output == "error: aborted"
    assert await survivors(pgid) == []
    assert not any(running(pid) for pid in alive)


async def test_r5_2_cancelling_the_call_kills_the_shell(make_ctx, workspace: Path) -> None:
    task = asyncio.create_task(shell(make_ctx(shell_kill_grace=0.2),
                                     "echo $$ > pgid; sleep 100 & sleep 100", timeout=60))
    pgid, alive = await running_group(workspace / "pgid", task)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await survivors(pgid) == []
    assert not any(running(pid) for pid in alive)


async def test_r5_2_direct_abort_reports_the_output_so_far(make_ctx, workspace: Path) -> None:
    from evacore.agent.tools.shell import shell as handler
    from evacore.errors import ToolError

    ctx = make_ctx(shell_kill_grace=0.2)
    task = asyncio.create_task(handler({"command": "echo $$ | tee pgid; sleep 100 & sleep 100"},
                                       ctx))
    _, alive = await running_group(workspace / "pgid", task)
    ctx.abort.set()
    with pytest.raises(ToolError) as caught:
        await asyncio.wait_for(task, 5)
    pgid = (workspace / "pgid").read_text()
    assert caught.value.message == ("aborted; the command and its child processes were killed. "
                                    f"Output so far:\n{pgid}")
    assert await survivors(int(pgid)) == []
    assert not any(running(pid) for pid in alive)


async def test_r5_2_background_process_holding_output_is_stopped(make_ctx) -> None:
    output, error = await shell(make_ctx(shell_kill_grace=0.2), "echo $$; sleep 100 &")
    assert not error
    assert "background processes that kept the output open were stopped" in output
    assert await survivors(int(output.split("\n", 1)[0])) == []


async def test_r5_2_timeout_is_limited_by_the_settings(make_ctx) -> None:
    output, error = await shell(make_ctx(shell_max_timeout=5), "echo hi", timeout=999)
    assert (output, error) == ("hi\n[timeout lowered to the maximum, 5s]", False)
    output, error = await shell(make_ctx(), "echo hi", timeout=0)
    assert error and output == "error: timeout must be a positive number of seconds"


async def test_r5_2_the_command_inherits_no_descriptor_of_the_core(make_ctx) -> None:
    # the background job is looked at once it runs `sleep`: between its fork and its exec,
    # bash itself briefly holds /dev/null open there (a background job's stdin)
    output, error = await shell(
        make_ctx(), "ls /proc/$$/fd; sleep 5 & sleep 0.2; ls /proc/$!/fd; kill $!")
    assert (output, error) == ("0\n1\n2\n0\n1\n2\n", False)


async def test_r5_2_a_detached_job_survives_the_call_and_its_timeout(
    make_ctx, workspace: Path
) -> None:
    started_at = asyncio.get_running_loop().time()
    output, error = await shell(
        make_ctx(shell_kill_grace=0.2),
        "nohup sleep 30 >/dev/null 2>&1 & echo $! > job; echo started", timeout=1)
    took = asyncio.get_running_loop().time() - started_at
    job = int((workspace / "job").read_text())
    try:
        assert (output, error) == ("started\n", False)
        assert took < 0.4  # no wait for output the job does not hold
        assert running(job)
        await asyncio.sleep(1.3)  # past the call's timeout
        assert running(job)
    finally:
        os.kill(job, 9)
