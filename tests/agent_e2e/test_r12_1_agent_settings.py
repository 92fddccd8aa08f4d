"""R12.1, R5.2: every tool limit is an `agent.*` setting (environment `EVACORE_AGENT__*` or
evacore.toml) that reaches the tools of running tours; a bad tool table fails at load."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from evacore.agent.registry import ToolSettings
from evacore.pipeline.tour_tools import tool_settings
from evacore.config import Settings
from tests.agent_e2e._tours import named, run_tour, scripted_chat

ENV = {
    "SHELL_TIMEOUT": "3", "SHELL_MAX_TIMEOUT": "9", "SHELL_OUTPUT_CAP": "1234",
    "SHELL_KILL_GRACE": "0.5", "READ_MAX_BYTES": "77", "WRITE_MAX_BYTES": "88",
    "LIST_MAX_ENTRIES": "5", "CLIENT_OP_TIMEOUT": "7",
    "TOOL_TIMEOUTS": '{"read_file": 4}', "TOOL_POLICY": '{"trusted": {"allow": ["shell"]}}',
}


def test_r12_1_every_tool_setting_comes_from_the_environment(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(f"EVACORE_AGENT__{name}", value)
    settings = Settings(data_dir=tmp_path)
    tools = tool_settings(SimpleNamespace(settings=settings))  # type: ignore[arg-type]
    assert tools == ToolSettings(
        shell_timeout=3, shell_max_timeout=9, shell_output_cap=1234, shell_kill_grace=0.5,
        read_max_bytes=77, write_max_bytes=88, list_max_entries=5, client_op_timeout=7,
        tool_timeouts={"read_file": 4},
    )
    assert settings.agent.tool_policy == {"trusted": {"allow": ["shell"]}}
    defaults = ToolSettings()
    changed = {f.name for f in dataclasses.fields(ToolSettings)
               if getattr(tools, f.name) != getattr(defaults, f.name)}
    assert changed == {f.name for f in dataclasses.fields(ToolSettings)}


def test_r12_1_tool_policy_comes_from_evacore_toml(tmp_path: Path) -> None:
    (tmp_path / "evacore.toml").write_text(
        '[agent]\nshell_timeout = 5\n[agent.tool_policy.trusted]\nallow = ["kind:write"]\n')
    agent = Settings(data_dir=tmp_path).agent
    assert agent.shell_timeout == 5
    assert agent.tool_policy == {"trusted": {"allow": ["kind:write"]}}


@pytest.mark.parametrize("agent", [
    {"tool_policy": {"guest": {"allow": ["kind:machine"]}}},
    {"tool_policy": {"admin": {"allow": ["shell"]}}},
    {"tool_policy": {"trusted": {"allow": "shell"}}},
    {"tool_timeouts": {"shell": 0}},
    {"shell_timeout": 0},
    {"max_steps": 0},
], ids=["guest-machine", "unknown-role", "not-a-list", "zero-tool-timeout",
        "zero-shell-timeout", "zero-steps"])
def test_r12_1_bad_agent_settings_fail_at_load(tmp_path: Path, agent: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        Settings(data_dir=tmp_path, agent=agent)


@pytest.mark.parametrize("agent_settings", [{"read_max_bytes": 22}], indirect=True)
async def test_r12_1_settings_reach_the_tools_of_a_tour(
        client: httpx.AsyncClient, workspace: Path) -> None:
    (workspace / "long.txt").write_text("0123456789\n" * 5)
    chat = await scripted_chat(client, [
        {"step": 0, "tool_calls": [{"name": "read_file", "arguments": {"path": "long.txt"}}]},
        {"step": 1, "text": "Read a part."},
    ])
    _, events = await run_tour(client, chat, "read it")
    [result] = named(events, "tool_result")
    assert result["content"] == ("0123456789\n" * 2
                                 + "[lines 1–2 of long.txt; more follows: continue with offset=3]")
