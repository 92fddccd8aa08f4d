"""R12.1: docs/tools.md names the real settings: every `agent.*` field with its default, and
its tool-table examples load as written."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

from evacore.config import AgentSettings, Settings

DOC = (Path(__file__).parents[2] / "docs" / "tools.md").read_text(encoding="utf-8")


def _settings_rows() -> dict[str, str]:
    section = DOC[DOC.index("## Settings"):]
    return dict(re.findall(r"^\| `(\w+)` \| ([^|]+?) \|", section, re.MULTILINE))


def test_r12_1_every_agent_setting_is_documented_with_its_default() -> None:
    rows = _settings_rows()
    defaults = AgentSettings().model_dump()
    assert set(rows) == set(defaults)
    for name, value in defaults.items():
        shown = rows[name].strip("`")
        assert (json.loads(shown) == value), (name, shown, value)
    assert "tools.policy" not in DOC
    assert "EVACORE_AGENT__<NAME>" in DOC and "agent.tool_policy" in DOC


def test_r12_1_documented_tool_policy_examples_load(tmp_path: Path) -> None:
    toml_block = re.search(r"```toml\n(.*?)```", DOC, re.DOTALL)
    env_line = re.search(r"EVACORE_AGENT__TOOL_POLICY='(.*)'", DOC)
    assert toml_block and env_line
    from_toml = tomllib.loads(toml_block.group(1))["agent"]["tool_policy"]
    from_env = json.loads(env_line.group(1))
    assert from_toml == from_env
    assert Settings(data_dir=tmp_path, agent={"tool_policy": from_env}).agent.tool_policy == from_env
