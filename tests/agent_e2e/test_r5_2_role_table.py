"""R5.2, R8.3, R9.2: which tools a tour is offered, read from the tools list sent upstream:
by role (guest, trusted, master), by environment (telegram, client ops), never by text."""

from __future__ import annotations

from typing import Any

import httpx

from tests.agent_e2e._tours import (
    as_user,
    named,
    offered_tools,
    run_tour,
    scripted_chat,
    stored_variant,
)
from tests.conftest import make_user

FILES_AND_SHELL = {"read_file", "list_dir", "write_file", "write_diff", "shell"}
READS = {"read_file", "list_dir"}
WRITES_AND_SHELL = {"write_file", "write_diff", "shell"}
OPS = [{"name": "run", "description": "Run a command on my laptop.",
        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}]


async def offered(client: httpx.AsyncClient, role: str | None, **body: Any) -> set[str]:
    """Tools offered to a tour of a chat owned by a fresh user of `role` (None: the master)."""
    headers = as_user(await make_user(client, role)) if role else None
    chat = await scripted_chat(client, [{"text": "ok"}], headers)
    tour_id, events = await run_tour(client, chat, "use the shell and read_file please",
                                     headers, **body)
    assert named(events, "done"), events
    return await offered_tools(client, tour_id)


async def test_r5_2_guest_is_never_offered_file_or_shell_tools(client: httpx.AsyncClient) -> None:
    assert not offered_tools_overlap(await offered(client, "guest"))
    # A guest's env override is not honoured: no telegram tool appears.
    assert "telegram_react" not in await offered(client, "guest", env={"telegram": True})


def offered_tools_overlap(names: set[str]) -> set[str]:
    return names & FILES_AND_SHELL


async def test_r5_2_guest_calling_shell_anyway_gets_an_error_result(
        client: httpx.AsyncClient) -> None:
    token = await make_user(client, "guest")
    chat = await scripted_chat(client, [
        {"step": 0, "tool_calls": [{"name": "shell", "arguments": {"command": "id"}}]},
        {"step": 1, "text": "Could not."},
    ], as_user(token))
    _, events = await run_tour(client, chat, "run id", as_user(token))
    [result] = named(events, "tool_result")
    assert result["content"].startswith("error: unknown tool 'shell'; available:")
    assert named(events, "message")[0]["content"] == "Could not."
    [step] = (await stored_variant(client, chat, as_user(token)))["steps"]
    assert step["results"][0]["content"] == result["content"]


async def test_r5_2_trusted_gets_reads_but_no_writes_or_shell(client: httpx.AsyncClient) -> None:
    names = await offered(client, "trusted")
    assert READS <= names
    assert not names & WRITES_AND_SHELL


async def test_r5_2_master_gets_every_file_tool_and_shell(client: httpx.AsyncClient) -> None:
    names = await offered(client, None)
    assert FILES_AND_SHELL <= names
    assert "telegram_react" not in names
    assert not any(n.startswith("client_") for n in names)


async def test_r5_2_telegram_react_only_in_telegram_tours(client: httpx.AsyncClient) -> None:
    assert "telegram_react" in await offered(client, None, env={"telegram": True})
    assert "telegram_react" not in await offered(client, None, env={"telegram": False})


async def test_r9_2_client_op_tools_only_in_tours_that_declared_them(
        client: httpx.AsyncClient) -> None:
    assert "client_run" in await offered(client, None, client_ops=OPS)
    assert not any(n.startswith("client_") for n in await offered(client, None))
    assert not any(n.startswith("client_") for n in await offered(client, "trusted"))
