"""R14.3, R11: `evacore chat` as a subprocess, remote (`--url`, a real `evacore serve` on
loopback) and embedded (no `--url`: the local data dir, no server), driven by piped stdin."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import httpx

from tests.channels.terminal.conftest import ROOT, cli_env, scripted_chat
from tests.conftest import MASTER_TOKEN
from tests.helpers import ServerProcess


def remote(server: ServerProcess, *extra: str) -> list[str]:
    return ["chat", "--url", server.url, "--token", MASTER_TOKEN, *extra]


def assistant_messages(api: httpx.Client, chat: str) -> list[dict]:
    messages = api.get(f"/v1/chats/{chat}/messages").json()["messages"]
    return [m for m in messages if m["role"] == "assistant"]


def test_r14_3_chat_remote_regen_and_swipe_add_variants(
        server: ServerProcess, api: httpx.Client, run_cli) -> None:
    chat = scripted_chat(api, [])  # the mock echoes
    done = run_cli(*remote(server, "--chat", chat), input="hello there\n/regen\n/swipe\n/quit\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("(mock) You said: hello there") == 3
    [answer] = assistant_messages(api, chat)
    assert len(answer["variants"]) == 3
    assert answer["active_variant"] == answer["variants"][-1]["id"]
    tours = re.findall(r"^tour (\S+) completed", done.stderr, re.MULTILINE)
    modes = [api.get(f"/v1/tours/{t}").json()["mode"] for t in tours]
    assert modes == ["normal", "regenerate", "swipe"]


def test_r14_3_chat_remote_continue_new_inspect_and_names(
        server: ServerProcess, api: httpx.Client, run_cli) -> None:
    book = api.post("/v1/lorebooks", json={"name": "bestiary", "entries": [
        {"key": ["dragon"], "content": "Dragons here breathe frost.", "comment": "dragons"}]})
    assert book.status_code == 201, book.text
    character = api.post("/v1/characters", json={
        "name": "Seraphina", "description": "{{char}} is a forest guardian."})
    assert character.status_code == 201, character.text
    conn = api.post("/v1/connections", json={"name": "Echo Box", "kind": "mock"}).json()["id"]

    done = run_cli(*remote(server, "--character", "seraphina", "--connection", "echo box"),
                   input="tell me of the dragon\n/continue\n/inspect\n/new\nagain\n")

    assert done.returncode == 0, done.stderr
    first = re.search(r"^chat (\S+) with Seraphina", done.stderr, re.MULTILINE)
    second = re.search(r"^new chat (\S+)", done.stderr, re.MULTILINE)
    assert first and second, done.stderr
    chat = api.get(f"/v1/chats/{first[1]}").json()
    assert chat["character_id"] == character.json()["id"] and chat["connection_id"] == conn
    new = api.get(f"/v1/chats/{second[1]}").json()
    assert (new["character_id"], new["connection_id"]) == (chat["character_id"], conn)
    [answer] = assistant_messages(api, first[1])
    # continue: a new active variant holding the old text plus the continuation
    old, extended = answer["variants"]
    assert answer["active_variant"] == extended["id"]
    assert extended["content"].startswith(old["content"]) and extended["content"] != old["content"]
    [again] = assistant_messages(api, second[1])
    assert again["content"] == "(mock) You said: again"
    # /inspect: the continue tour's diagnostics, readable
    for heading in ("stages (ms)", "change log", "context shift:", "stream rules:",
                    "requests sent: 1", "mode continue"):
        assert heading in done.stdout, heading
    assert "user_input" in done.stdout and "save" in done.stdout
    assert "Seraphina ›" not in done.stdout  # piped output carries the answer text only


def test_r14_3_inspect_shows_lore_cuts_and_rule_firings(
        server: ServerProcess, api: httpx.Client, run_cli) -> None:
    book = api.post("/v1/lorebooks", json={"name": "bestiary", "entries": [
        {"key": ["wyvern"], "content": "Wyverns have two legs.", "comment": "wyverns"}]}).json()
    conn = api.post("/v1/connections", json={
        "name": "tight", "kind": "mock", "context_size": 260, "max_tokens": 40,
        "params": {"script": [
            {"step": 0, "tool_calls": [{"name": "shell", "arguments": {"command": "true"}}]},
            {"step": 1, "text": "Checked."}]}}).json()["id"]
    chat = api.post("/v1/chats", json={"connection_id": conn,
                                       "lorebook_ids": [book["id"]]}).json()["id"]
    for i in range(8):
        api.post(f"/v1/chats/{chat}/messages", json={"role": "user",
                                                     "content": f"old line {i} " + "x " * 40})
    done = run_cli("client", "--url", server.url, "--token", MASTER_TOKEN, "--root", ".",
                   "--chat", chat, "--yes", input="what about the wyvern?\n/inspect\n")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "lorebook entries" in out and "bestiary" in out and "fired" in out
    assert "key 'wyvern'" in out
    assert "history:" in out and "nothing was cut" not in out  # context shift cut history
    assert "local_shell_for_his_machine" in out and "tool:shell" in out
    assert "requests sent: 2" in out


def test_r14_3_chat_refuses_unknown_names_and_bad_tokens_clearly(
        server: ServerProcess, invoke) -> None:
    done = invoke(*remote(server, "--character", "Nobody At All"), input="hi\n")
    assert done.exit_code == 2
    assert "no character named 'Nobody At All'" in done.stderr
    bad_token = invoke("chat", "--url", server.url, "--token", "evc_wrong", "-m", "hi")
    assert bad_token.exit_code == 2
    assert "HTTP 401" in bad_token.stderr
    both = invoke(*remote(server, "--chat", "x", "--character", "y"))
    assert both.exit_code == 2 and "not both" in both.stderr
    unreachable = invoke("chat", "--url", "http://127.0.0.1:9", "--token", "t", "-m", "hi")
    assert unreachable.exit_code == 2 and "cannot reach http://127.0.0.1:9" in unreachable.stderr


def test_r14_3_chat_embedded_answers_with_the_mock_and_no_server(
        tmp_path: Path, run_cli) -> None:
    data = tmp_path / "data"
    env = cli_env(data)  # no --url, no server: the local data dir only

    done = run_cli("chat", input="hello embedded\n/regen\n/inspect\n", env=env)

    assert done.returncode == 0, done.stderr
    assert done.stdout.count("(mock) You said: hello embedded") == 2
    assert "mode regenerate" in done.stdout and "stages (ms)" in done.stdout
    assert "created the master token (shown once" in done.stderr
    assert (data / "evacore.db").is_file()
    chat = re.search(r"^chat (\S+) with Assistant · the local data dir", done.stderr, re.MULTILINE)
    assert chat, done.stderr

    again = run_cli("chat", "--chat", chat[1], "--message", "just once", env=env)

    assert again.returncode == 0, again.stderr
    assert again.stdout == "(mock) You said: just once\n"  # stdout: the answer only
    assert "created the master token" not in again.stderr
    assert f"chat {chat[1]} with Assistant" in again.stderr
    for run in (done, again):  # a terminal user sees no log lines at the default level
        assert not [line for line in run.stderr.splitlines() if line.startswith("{")], run.stderr


def test_r14_3_input_that_is_no_utf8_is_sent_with_replacement_characters(
        tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "evacore", "chat"], input=b"ok1\n\xff\xfe bad\nok2\n",
        capture_output=True, cwd=ROOT, timeout=120, env=cli_env(tmp_path / "data"),
        check=False)
    out = done.stdout.decode("utf-8", "replace")
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
    assert "You said: \ufffd\ufffd bad" in out and "You said: ok2" in out
