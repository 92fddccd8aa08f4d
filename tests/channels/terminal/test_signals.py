"""R14.3: `evacore client` and `evacore chat` ended from outside (SIGTERM: a `kill`; SIGHUP: the
terminal window closed) close what they opened on the way out instead of dying at once: the
shell op that runs is killed with its children, the stream is closed (so the server aborts
the tour), an embedded chat's socket folder goes, and the process exits 128 + the signal.
A chat waiting for a line of its input leaves at once too."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from tests.channels.terminal.conftest import ROOT, cli_env, scripted_chat
from tests.channels.terminal.test_client import calls, client_args
from tests.helpers import ServerProcess

WAIT = 30.0


def _start(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "evacore", *args], cwd=ROOT, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _until(check, what: str, proc: subprocess.Popen[str] | None = None) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + WAIT
    while not check():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"exited early ({proc.returncode}) waiting for {what}:\n"
                                 + (proc.stderr.read() if proc.stderr else ""))
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def _ended(proc: subprocess.Popen[str], signum: int) -> str:
    proc.send_signal(signum)
    try:
        _, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError("the client did not leave after the signal") from None
    assert proc.returncode == 128 + signum, err
    return err


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_r14_3_a_client_ended_by_a_signal_kills_its_shell_op_and_ends_the_tour(
        server: ServerProcess, api: httpx.Client, tmp_path: Path, signum: int) -> None:
    root = tmp_path / "root"
    root.mkdir()
    chat = scripted_chat(api, [
        {"step": 0, "tool_calls": calls(("client_shell", {
            "command": "echo $$ > sh.pid; sleep 300; echo never > after.txt"}))},
        {"step": 1, "text": "Done."}])
    proc = _start(client_args(server, root, chat, "--yes", "--message", "run it"),
                  cli_env(tmp_path / "cli-data"))
    pid_file = root / "sh.pid"
    _until(lambda: pid_file.exists() and pid_file.read_text().strip(), "the op to start", proc)
    pgid = int(pid_file.read_text())

    _ended(proc, signum)

    _until(lambda: _group_gone(pgid), "the op's process group to be gone")
    assert not (root / "after.txt").exists()

    def aborted() -> bool:
        messages = api.get(f"/v1/chats/{chat}/messages").json()["messages"]
        answers = [m for m in messages if m["role"] == "assistant"]
        return bool(answers) and any(v.get("status") == "aborted"
                                     for v in answers[-1]["variants"])

    _until(aborted, "the server to abort the tour")


def test_r14_3_a_client_waiting_for_its_input_leaves_on_sigterm(
        server: ServerProcess, api: httpx.Client, tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    chat = scripted_chat(api, [{"text": "Hello."}])
    proc = _start(client_args(server, root, chat), cli_env(tmp_path / "cli-data"))
    assert proc.stderr is not None
    seen: list[str] = []
    _until(lambda: seen.append(proc.stderr.readline()) or f"chat {chat}" in seen[-1],
           "the chat to open", proc)
    _ended(proc, signal.SIGTERM)  # stdin stays open and empty: the read must not hold it


def test_r14_3_an_embedded_chat_ended_by_sighup_removes_its_socket_folder(
        tmp_path: Path) -> None:
    # a short folder of its own: a Unix socket's path has a small limit
    scratch = Path(tempfile.mkdtemp(prefix="evs-", dir="/tmp"))
    try:
        _embedded_chat_ended(tmp_path, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _embedded_chat_ended(tmp_path: Path, scratch: Path) -> None:
    proc = _start(["chat"], cli_env(tmp_path / "cli-data", TMPDIR=str(scratch)))
    _until(lambda: any(p.name.startswith("evacore-chat-") for p in scratch.iterdir()),
           "the embedded server's socket folder", proc)
    assert proc.stderr is not None
    _until(lambda: "chat " in proc.stderr.readline(), "the chat to open", proc)
    _ended(proc, signal.SIGHUP)
    assert [p.name for p in scratch.iterdir() if p.name.startswith("evacore-chat-")] == []
