"""R5.2, R5.3 through the loop: path escapes, huge shell output and a hanging shell become
tool results (`error: …` where they fail) and the tour goes on to its answer."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from evacore.agent.registry import ToolContext, run_tool
from evacore.agent.tools import default_registry
from tests.agent_e2e._tours import named, run_tour, scripted_chat, stored_variant

CAP = 2_000


@pytest.fixture
def agent_settings() -> dict[str, Any]:
    return {"shell_timeout": 0.5, "shell_output_cap": CAP}


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text("top secret\n")
    return folder


def _final(tag: str, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"match": tag, "step": 0, "tool_calls": calls},
            {"match": tag, "step": 1, "text": "Carried on."}]


async def test_r5_2_escaping_paths_are_error_results_and_the_tour_goes_on(
        client: httpx.AsyncClient, workspace: Path, outside: Path) -> None:
    (workspace / "link.txt").symlink_to(outside / "secret.txt")
    (workspace / "out").symlink_to(outside, target_is_directory=True)
    calls = [
        {"name": "read_file", "arguments": {"path": str(outside / "secret.txt")}},
        {"name": "read_file", "arguments": {"path": "../outside/secret.txt"}},
        {"name": "read_file", "arguments": {"path": "link.txt"}},
        {"name": "write_file", "arguments": {"path": "out/new.txt", "content": "x"}},
        {"name": "write_diff", "arguments": {"path": "link.txt",
                                             "diff": "@@ -1 +1 @@\n-top secret\n+pwned\n"}},
        {"name": "list_dir", "arguments": {"path": "out"}},
    ]
    chat = await scripted_chat(client, _final("escape", calls))
    _, events = await run_tour(client, chat, "escape please")
    results = named(events, "tool_result")
    assert len(results) == len(calls)
    reasons = ["absolute paths are not allowed", "'..' leads outside the workspace",
               "link.txt is a symlink that leads outside",
               "out is a symlink that leads outside", "link.txt is a symlink that leads outside",
               "out is a symlink that leads outside"]
    for result, reason in zip(results, reasons, strict=True):
        assert result["content"].startswith("error: PathEscape: "), result
        assert reason in result["content"]
        assert "top secret" not in result["content"]
    assert named(events, "message")[0]["content"] == "Carried on."
    [step] = (await stored_variant(client, chat))["steps"]
    assert [r["content"] for r in step["results"]] == [r["content"] for r in results]
    assert all(r["error"] for r in step["results"])
    assert sorted(os.listdir(outside)) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "top secret\n"


async def _one_shell(client: httpx.AsyncClient, tag: str, command: str
                     ) -> tuple[str, str, list[tuple[str, dict[str, Any]]], str]:
    """A tour whose model runs one shell command and then answers: (chat, tour id, events,
    the command's result as streamed)."""
    calls = [{"name": "shell", "arguments": {"command": command}}]
    chat = await scripted_chat(client, _final(tag, calls))
    tour_id, events = await run_tour(client, chat, f"{tag} please")
    [result] = named(events, "tool_result")
    return chat, tour_id, events, result["content"]


async def test_r5_2_huge_shell_output_is_capped_in_the_result(
        client: httpx.AsyncClient, workspace: Path) -> None:
    chat, _, events, content = await _one_shell(client, "flood",
                                                "yes 0123456789 | head -n 100000")
    assert content.startswith("0123456789\n") and content.endswith("0123456789\n")
    assert f"[… {1_100_000 - CAP} bytes of output dropped …]" in content
    assert len(content) < CAP + 100
    assert named(events, "message")[0]["content"] == "Carried on."
    [step] = (await stored_variant(client, chat))["steps"]
    assert step["results"][0]["content"] == content


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


async def test_r5_2_hanging_shell_is_killed_with_its_children_and_the_tour_goes_on(
        client: httpx.AsyncClient, workspace: Path) -> None:
    command = "sleep 100 & echo $! > child.pid; sleep 100"
    chat = await scripted_chat(client, _final("hang", [
        {"name": "shell", "arguments": {"command": command}}]))
    started = time.monotonic()
    _, events = await run_tour(client, chat, "hang around")
    assert time.monotonic() - started < 10
    [result] = named(events, "tool_result")
    assert result["content"] == ("error: timed out after 0.5s; the command and its child "
                                 "processes were killed")
    assert named(events, "message")[0]["content"] == "Carried on."
    child = int((workspace / "child.pid").read_text())
    for _ in range(100):
        if not _alive(child):
            break
        await asyncio.sleep(0.02)
    assert not _alive(child), "the shell's background child survived the timeout"


async def test_r5_2_write_diff_through_a_symlink_out_writes_nothing(
        tmp_path: Path, outside: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "dir").mkdir(parents=True)
    (workspace / "dir" / "link").symlink_to(outside, target_is_directory=True)
    ctx = ToolContext(workspace=workspace, role="master", env=frozenset(),
                      abort=asyncio.Event())
    for path in ("dir/link/secret.txt", "dir/../dir/link/secret.txt"):
        args = {"path": path, "diff": "<<<<<<< SEARCH\ntop secret\n=======\npwned\n>>>>>>> REPLACE\n"}
        outcome = await run_tool(default_registry(), "write_diff", json.dumps(args), ctx)
        assert outcome.error and "dir/link is a symlink that leads outside" in outcome.output
    assert (outside / "secret.txt").read_text() == "top secret\n"


async def test_r5_3_a_tool_result_with_nul_characters_is_stored_on_every_backend(
        client: httpx.AsyncClient, workspace: Path) -> None:
    # `find -print0`, a binary file's bytes: kept as written (JSON escapes U+0000, which
    # PostgreSQL's json columns take, unlike its text and jsonb)
    chat, tour_id, events, content = await _one_shell(client, "nul", "printf 'a\\000b\\n'")
    assert content == "a\x00b\n"  # the stream shows what the command wrote
    assert named(events, "message")[0]["content"] == "Carried on."
    assert named(events, "error") == []
    [step] = (await stored_variant(client, chat))["steps"]
    assert step["results"][0]["content"] == "a\x00b\n"
    tour = (await client.get(f"/v1/tours/{tour_id}")).json()
    assert tour["status"] == "completed"
    assert "save_problem" not in tour["diagnostics"]
