"""R14.3: `evacore chat` in a real terminal (a pseudo-terminal driven by pexpect): the prompt,
Alt+Enter for a new line, history with the Up key (kept in the data dir), the answer streamed,
Ctrl-C stopping an answer (the tour is aborted), /quit."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import httpx
import pexpect

from tests.channels.terminal.conftest import ROOT, cli_env, scripted_chat
from tests.conftest import MASTER_TOKEN
from tests.helpers import ServerProcess

SLOW = " ".join(f"w{i}" for i in range(60))


def test_r14_3_chat_in_a_terminal(server: ServerProcess, api: httpx.Client,
                                  tmp_path: Path) -> None:
    chat = scripted_chat(api, [{"match": "slow", "text": SLOW, "token_delay": 0.1}])
    data = tmp_path / "cli-data"
    child = pexpect.spawn(
        sys.executable, ["-m", "evacore", "chat", "--url", server.url, "--token", MASTER_TOKEN,
                         "--chat", chat],
        cwd=str(ROOT), env=cli_env(data, TERM="xterm", PROMPT_TOOLKIT_NO_CPR="1"), encoding="utf-8", timeout=60,
        dimensions=(40, 160))
    try:
        child.expect("you ›")
        child.send("first line\x1b\rsecond line\r")  # Esc+Enter inserts a new line
        child.expect(r"Assistant › .*You said: first line second line")
        child.expect("you ›")
        child.send("\x1b[A")  # Up: the last message comes back from the history
        child.expect("second line")
        child.send("\r")
        child.expect(r"Assistant › .*You said: first line second line")
        child.expect("you ›")
        child.send("slow please\r")
        child.expect("w3 ")
        child.sendintr()  # Ctrl-C stops the answer, not the chat
        child.expect(r"\(stopped\)")
        child.expect("you ›")
        child.send("/quit\r")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0, child.before
    history = (data / "terminal_history").read_text()
    assert "+first line\n+second line\n" in history and "+slow please\n" in history
    messages = api.get(f"/v1/chats/{chat}/messages").json()["messages"]
    assert [m["content"] for m in messages if m["role"] == "user"] == [
        "first line\nsecond line", "first line\nsecond line", "slow please"]
    stopped = messages[-1]
    assert stopped["role"] == "assistant"
    assert stopped["content"].startswith("w0 w1 w2 w3") and stopped["content"] != SLOW


def test_r14_3_ctrl_c_stops_an_op_after_its_question_was_answered(
        server: ServerProcess, api: httpx.Client, tmp_path: Path) -> None:
    """The y/N question is a prompt of its own; Ctrl-C must still stop the tour after it."""
    root = tmp_path / "root"
    root.mkdir()
    chat = scripted_chat(api, [
        {"step": 0, "tool_calls": [{"name": "client_shell",
                                    "arguments": {"command": "sleep 30"}}]},
        {"step": 1, "text": "Slept."}])
    child = pexpect.spawn(
        sys.executable, ["-m", "evacore", "client", "--url", server.url, "--token",
                         MASTER_TOKEN, "--root", str(root), "--chat", chat],
        cwd=str(ROOT), env=cli_env(tmp_path / "cli-data", TERM="xterm",
                                   PROMPT_TOOLKIT_NO_CPR="1"),
        encoding="utf-8", timeout=60, dimensions=(40, 160))
    try:
        child.expect("you ›")
        child.send("nap please\r")
        child.expect(r"\[y/N\]")
        child.send("y\r")
        child.expect("sleep 30")  # the op runs
        time.sleep(1.0)  # the question's prompt has given the terminal back
        started = time.monotonic()
        child.sendintr()
        child.expect(r"\(stopped\)")
        assert time.monotonic() - started < 10  # not the 30 s the op would take
        child.expect("you ›")
        child.send("/quit\r")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
