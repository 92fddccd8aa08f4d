"""R14.3, R9.2: `evacore client` as a subprocess against a real `evacore serve` on loopback:
it declares its ops, runs each `client_op` inside --root only, asks before each op unless
--yes, posts the results, and `--message` exits 0 when the tour completed."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from tests.channels.terminal.conftest import results_of, scripted_chat, tour_id_of
from tests.conftest import MASTER_TOKEN
from tests.fakes.upstream import FAKE_API_KEY, FakeUpstream
from tests.helpers import ServerProcess

FOUR = {"client_shell", "client_read_file", "client_write_file", "client_list_dir"}


def client_args(server: ServerProcess, root: Path, chat: str | None, *extra: str) -> list[str]:
    args = ["client", "--url", server.url, "--token", MASTER_TOKEN, "--root", str(root)]
    return [*args, *(["--chat", chat] if chat else []), *extra]


def calls(*items: tuple[str, dict[str, object]]) -> list[dict[str, object]]:
    return [{"name": name, "arguments": args} for name, args in items]


def test_r14_3_client_message_offers_four_ops_and_reads_a_file_in_root(
        server: ServerProcess, api: httpx.Client, run_cli, tmp_path: Path,
        openai_fake: FakeUpstream) -> None:
    root = tmp_path / "root"
    (root / "notes").mkdir(parents=True)
    (root / "notes" / "todo.txt").write_text("buy milk (note 7731)\n")
    openai_fake.script.tool_call("client_read_file", {"path": "notes/todo.txt"},
                                 text="Let me look.")
    openai_fake.script.reply("Your list says: buy milk.")
    conn = api.post("/v1/connections", json={
        "name": "fake upstream", "kind": "openai-chat", "base_url": openai_fake.base_url,
        "api_key": FAKE_API_KEY, "model": "fake-model"}).json()["id"]
    chat = api.post("/v1/chats", json={"connection_id": conn}).json()["id"]

    done = run_cli(*client_args(server, root, chat, "--yes", "--message", "what is on my list?"))

    assert done.returncode == 0, done.stderr
    assert "Your list says: buy milk." in done.stdout
    first, second = openai_fake.bodies("/v1/chat/completions")
    offered = {t["function"]["name"] for t in first["tools"]}
    assert FOUR <= offered
    # the file was read on the client side and its content reached the model
    [tool_message] = [m for m in second["messages"] if m["role"] == "tool"]
    assert tool_message["content"] == "buy milk (note 7731)\n"
    tour = api.get(f"/v1/tours/{tour_id_of(done.stderr)}").json()
    assert tour["status"] == "completed" and tour["env"]["client_ops"] is True


def test_r14_3_escapes_are_refused_as_error_results_and_nothing_leaves_root(
        server: ServerProcess, api: httpx.Client, run_cli, tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("OUTSIDE-SECRET\n")
    (root / "link").symlink_to(outside, target_is_directory=True)
    (root / "filelink").symlink_to(outside / "secret.txt")
    escapes = [
        ("client_read_file", {"path": "../outside/secret.txt"}),
        ("client_read_file", {"path": str(outside / "secret.txt")}),
        ("client_read_file", {"path": "link/secret.txt"}),
        ("client_read_file", {"path": "filelink"}),
        ("client_list_dir", {"path": "../outside"}),
        ("client_list_dir", {"path": "link"}),
        ("client_write_file", {"path": "../outside/escape.txt", "content": "x"}),
        ("client_write_file", {"path": "link/new.txt", "content": "x"}),
        ("client_write_file", {"path": str(outside / "abs.txt"), "content": "x"}),
        ("client_write_file", {"path": "filelink", "content": "overwritten"}),
    ]
    inside = ("client_write_file", {"path": "kept/inside.txt", "content": "inside\n"})
    chat = scripted_chat(api, [{"step": 0, "tool_calls": calls(*escapes, inside)},
                               {"step": 1, "text": "All done."}])

    done = run_cli(*client_args(server, root, chat, "--yes", "--message", "try everything"))

    assert done.returncode == 0, done.stderr
    results = results_of(api, chat)
    assert len(results) == len(escapes) + 1
    refused = [results[f"call_0_{i}"] for i in range(len(escapes))]
    for (name, args), content in zip(escapes, refused, strict=True):
        assert content.startswith("error:"), (name, args, content)
        assert "outside the workspace" in content or "absolute paths" in content, content
    assert not any("OUTSIDE-SECRET" in c for c in results.values())
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "OUTSIDE-SECRET\n"
    assert (root / "kept" / "inside.txt").read_text() == "inside\n"
    assert "All done." in done.stdout


def test_r14_3_without_yes_a_no_keeps_the_op_from_running(
        server: ServerProcess, api: httpx.Client, run_cli, tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    chat = scripted_chat(api, [
        {"step": 0, "tool_calls": calls(("client_shell", {"command": "echo ran > first.txt"}),
                                        ("client_shell", {"command": "echo ran > second.txt"}))},
        {"step": 1, "text": "Finished."}])

    done = run_cli(*client_args(server, root, chat, "--message", "make two files"),
                   input="y\nn\n")

    assert done.returncode == 0, done.stderr
    assert "shell on this machine: run `echo ran > first.txt`? [y/N]" in done.stderr
    assert "shell on this machine: run `echo ran > second.txt`? [y/N]" in done.stderr
    assert (root / "first.txt").read_text() == "ran\n"
    assert not (root / "second.txt").exists()
    results = results_of(api, chat)
    assert results["call_0_0"] == ""
    assert results["call_0_1"] == "error: the master declined to run this op on his machine"


def test_r14_3_shell_op_runs_in_root_with_a_timeout_and_an_output_cap(
        server: ServerProcess, api: httpx.Client, run_cli, tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    chat = scripted_chat(api, [
        {"step": 0, "tool_calls": calls(("client_shell", {"command": "pwd"}),
                                        ("client_shell", {"command": "sleep 30"}),
                                        ("client_shell", {"command": "yes | head -c 50000"}))},
        {"step": 1, "text": "Ran them."}])

    done = run_cli(*client_args(server, root, chat, "--yes", "--shell-timeout", "0.5",
                                "--output-cap", "1000", "--message", "run three"))

    assert done.returncode == 0, done.stderr
    results = results_of(api, chat)
    assert results["call_0_0"] == f"{root.resolve()}\n"
    assert results["call_0_1"].startswith("error: timed out after 0.5s")
    assert "bytes of output dropped" in results["call_0_2"]
    assert len(results["call_0_2"]) < 1200


def test_r14_3_a_client_tour_gets_the_local_shell_reminder_on_the_core_shell(
        server: ServerProcess, api: httpx.Client, run_cli, tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    chat = scripted_chat(api, [
        {"step": 0, "tool_calls": calls(("shell", {"command": "echo on-the-core"}))},
        {"step": 1, "text": "That ran on the server."}])

    done = run_cli(*client_args(server, root, chat, "--yes", "--message", "run echo"))

    assert done.returncode == 0, done.stderr
    tour = api.get(f"/v1/tours/{tour_id_of(done.stderr)}").json()
    assert tour["env"]["client_ops"] is True
    fired = [f["rule"] for f in tour["diagnostics"]["rules"]["fired"]]
    assert fired == ["local_shell_for_his_machine"]
    second = tour["diagnostics"]["requests"][1]["body"]["messages"]
    [tool_message] = [m for m in second if m["role"] == "tool"]
    assert tool_message["content"].startswith('<system-reminder rule="local_shell_for_his_machine">')
    assert "client operations" in tool_message["content"]
    assert results_of(api, chat) == {"call_0_0": "on-the-core\n"}  # stored clean


def test_r14_3_message_exits_non_zero_when_the_tour_fails(
        server: ServerProcess, api: httpx.Client, invoke, tmp_path: Path) -> None:
    chat = scripted_chat(api, [{"error": {"status": 500, "message": "upstream boom"}}])
    done = invoke(*client_args(server, tmp_path, chat, "--yes", "--message", "hi"))
    assert done.exit_code == 1
    assert "upstream boom" in done.stderr
    assert "failed" in done.stderr


def test_r14_3_allow_limits_the_ops_and_bad_values_are_refused(
        server: ServerProcess, api: httpx.Client, invoke, tmp_path: Path) -> None:
    chat = scripted_chat(api, [{"text": "Fine."}])
    done = invoke(*client_args(server, tmp_path, chat, "--allow", "read_file,list_dir",
                               "--message", "hello"))
    assert done.exit_code == 0, done.stderr
    assert done.stdout == "Fine.\n"
    tour = api.get(f"/v1/tours/{tour_id_of(done.stderr)}").json()
    offered = [n for n in tour["diagnostics"]["tools_offered"] if n.startswith("client_")]
    assert offered == ["client_read_file", "client_list_dir"]

    bad = invoke(*client_args(server, tmp_path, chat, "--allow", "read_file,format_disk",
                              "--message", "hello"))
    assert bad.exit_code == 2
    assert "unknown op 'format_disk'" in bad.stderr


def test_r14_3_a_guest_token_gets_a_clear_refusal(
        server: ServerProcess, api: httpx.Client, invoke, tmp_path: Path) -> None:
    guest = api.post("/v1/users", json={"name": "visitor", "role": "guest"}).json()["token"]
    args = ["client", "--url", server.url, "--token", guest, "--root", str(tmp_path),
            "--message", "hi"]
    done = invoke(*args)
    assert done.exit_code == 1
    assert "only the master's tours may declare client ops" in done.stderr
    assert "HTTP 403" in done.stderr


def test_r14_3_interactive_client_reads_a_script_of_lines(
        server: ServerProcess, api: httpx.Client, run_cli, tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.txt").write_text("alpha\n")
    chat = scripted_chat(api, [
        {"match": "list", "step": 0, "tool_calls": calls(("client_list_dir", {}))},
        {"match": "list", "step": 1, "text": "Listed."},
        {"text": "Plain answer."}])

    done = run_cli(*client_args(server, root, chat), input="list my folder\ny\n/inspect\n"
                   "just talk\n/quit\nnever sent\n")

    assert done.returncode == 0, done.stderr
    assert done.stdout.count("Listed.") == 1 and done.stdout.count("Plain answer.") == 1
    assert "tools offered:" in done.stdout and "client_list_dir" in done.stdout
    assert json.dumps(results_of(api, chat)) == json.dumps({})  # the last answer had no tools
    messages = api.get(f"/v1/chats/{chat}/messages").json()["messages"]
    assert [m["content"] for m in messages if m["role"] == "user"] == ["list my folder",
                                                                       "just talk"]


def test_r14_3_an_ops_question_shows_control_characters_written_out(
        server: ServerProcess, api: httpx.Client, run_cli, tmp_path: Path) -> None:
    """A command built to move the cursor and erase the question's line (so that it would
    read as a harmless one) is asked with its control characters written out."""
    root = tmp_path / "root"
    root.mkdir()
    sneaky = "touch EVIL # \x1b[2K\x1b[1Ashell on this machine: run `ls`"
    chat = scripted_chat(api, [
        {"step": 0, "tool_calls": calls(("client_shell", {"command": sneaky}))},
        {"step": 1, "text": "Done."}])

    done = run_cli(*client_args(server, root, chat, "--message", "look"), input="n\n")

    assert done.returncode == 0, done.stderr
    assert "\x1b[2K" not in done.stderr and "\x1b[1A" not in done.stderr
    assert "touch EVIL # \\x1b[2K\\x1b[1Ashell on this machine" in done.stderr
    assert not (root / "EVIL").exists()
